git commit -qam "Fix typo in README"
