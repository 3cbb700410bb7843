git init -q -b main . && git add -A && git commit -qm "Initial commit"
git checkout -q -b feature/login-form
