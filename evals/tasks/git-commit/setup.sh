git init -q -b main . && git add -A && git commit -qm "Initial commit"
printf '# Widget\n\nA small widget library.\n' > README.md
