"""`concast exp mtp`: the dissertation's MTP experiments (Noble 1999, chapter VII) beside its
numbers (issue #22). Scenario `sim`: its simulator (section 7.4) re-made in virtual time, our
sans-IO MTP client and server driven through its black-box network against its TCP model
(`mtping sim`, hosts/transport/src/mtp/blackbox.rs): the printed runs and the loss sweep.
Writes CSV, PNG and metadata to a new timestamped folder under results/mtp/.
"""
from .paper import EMPIRICAL_WAN, PRINTED
from .cli import main
from .sim import run_sim

__all__ = ["PRINTED", "EMPIRICAL_WAN", "run_sim", "main"]
