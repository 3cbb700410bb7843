sed -i 's/"\$source"/"$src"/' backup.sh && bash backup.sh
