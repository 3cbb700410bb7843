sed -i 's/recieve/receive/' README.md
