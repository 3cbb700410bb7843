sed -i 's/"default_color": "red"/"default_color": "blue"/' settings.json
