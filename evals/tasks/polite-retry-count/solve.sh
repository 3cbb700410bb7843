sed -i 's/^max_retries = 3$/max_retries = 5/' config.ini
