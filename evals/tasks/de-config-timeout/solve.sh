sed -i 's/"timeout": 10/"timeout": 30/' config.json
