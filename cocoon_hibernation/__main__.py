"""`python -m cocoon_hibernation`: the same command line as the `cocoon-hibernation` script."""

from cocoon_hibernation.main import main

if __name__ == "__main__":
    main(prog_name="cocoon-hibernation")
