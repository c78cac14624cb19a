"""``python -m agentctl`` is the same program as the ``agentctl`` console script."""

from agentctl.entry import main

if __name__ == "__main__":
    main()
