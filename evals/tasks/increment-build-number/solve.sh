sed -i 's/"build": 41/"build": 42/' build.json
