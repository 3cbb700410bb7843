sed -i 's/^port = 3000$/port = 8080/' config.toml
