git init -q -b main . && git add -A && git commit -qm "Initial commit"
printf 'def main():\n    print("app v2")\n' > src/app.py
