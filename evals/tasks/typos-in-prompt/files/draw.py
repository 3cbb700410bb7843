import json

with open("settings.json") as f:
    settings = json.load(f)

print(f"drawing in {settings['default_color']} with a {settings['border_color']} border")
