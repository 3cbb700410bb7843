sort -o names.txt names.txt
