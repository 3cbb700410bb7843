sed -i 's/^requests==2\.28\.1$/requests==2.32.3/' requirements.txt
