sed -i 's/calc_total/compute_total/g' billing.py main.py
