sed -i 's/^## Instalation$/## Installation/' README.md
