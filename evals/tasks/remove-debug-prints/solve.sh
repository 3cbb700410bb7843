sed -i '/DEBUG/d' app.py
