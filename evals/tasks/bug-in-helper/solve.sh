sed -i 's/return int(amount \* 100)/return round(amount * 100)/' money.py
