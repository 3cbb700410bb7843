printf 'print("Hello, keel!")\n' > hello.py
