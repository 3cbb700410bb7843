cat -s notes.txt | sed -e :a -e '/^\n*$/{$d;N;ba' -e '}' > notes.tmp && mv notes.tmp notes.txt
