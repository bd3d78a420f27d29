"""``python -m privlens [STREAMLIT OPTIONS]``: the dashboard, as the ``privlens`` command starts it."""

from privlens.launch import main

if __name__ == "__main__":
    main()
