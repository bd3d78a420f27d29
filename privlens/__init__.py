"""privlens: the Streamlit dashboard's shared UI code (pages in ``pages/``, all maths in privcore)."""
