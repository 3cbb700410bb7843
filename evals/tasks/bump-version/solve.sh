sed -i 's/0\.4\.1/0.4.2/' pyproject.toml tidyup/__init__.py
