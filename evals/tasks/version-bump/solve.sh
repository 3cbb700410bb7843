sed -i 's/1\.2\.3/1.3.0/' pyproject.toml src/app/__init__.py
