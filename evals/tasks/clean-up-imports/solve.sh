sed -i -e '/^import os$/d' -e '/^import re$/d' -e '/^from datetime import datetime$/d' -e 's/^from collections import Counter, defaultdict$/from collections import Counter/' report.py
python3 report.py
