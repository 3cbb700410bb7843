printf '__pycache__/\n*.log\n' > .gitignore
