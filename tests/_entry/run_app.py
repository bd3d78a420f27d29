"""AppTest entry: runs the real app.py from a folder without a ``pages/`` directory.

Streamlit's test harness resets its multipage state before every run and, when the entry script
sits next to a folder called ``pages``, runs the page file alone (its legacy folder mode); a real
server does that at most once. Entering through this file keeps every test run on app.py's
``st.navigation``, as in production.
"""

import runpy
from pathlib import Path

runpy.run_path(str(Path(__file__).resolve().parents[2] / "app.py"), run_name="__main__")
