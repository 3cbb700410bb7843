git revert --no-edit HEAD >/dev/null
