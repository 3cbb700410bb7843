cat -s todo.txt | sed -e :a -e '/^\n*$/{$d;N;ba' -e '}' > todo.tmp && mv todo.tmp todo.txt
