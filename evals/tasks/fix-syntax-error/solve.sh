sed -i 's/^def report(stock)$/def report(stock):/' report.py
