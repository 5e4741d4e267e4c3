"""The ACK study's books (testbed.ack_books): every ACK the clients' hostd captured is found
at R or in the link emulator's drop books, by cause; what neither explains is reported."""
from __future__ import annotations

from concast.topologies.experiments.ackstudy.testbed import LINK_DROP_BOOKS, ack_books, link_totals


def links(**grown) -> dict:
    d = dict.fromkeys(LINK_DROP_BOOKS, 0)
    d.update(grown)
    return d


def test_books_balance_when_every_missing_ack_was_dropped_on_a_link():
    row = {"acks_captured": 100, "records_at_r": 90}
    before = links(queue_mplex_records=5, loss_mplex_records=1)
    after = links(queue_mplex_records=12, loss_mplex_records=3, down_mplex_records=1,
                  queue_other=50)              # cross traffic drops carry no captured ACK
    books = ack_books(row, before, after)
    assert books == {"acks_lost_link_queue": 7, "acks_lost_link_loss": 2,
                     "acks_lost_link_down": 1, "acks_unaccounted": 0}


def test_an_ack_lost_elsewhere_is_unaccounted():
    row = {"acks_captured": 100, "records_at_r": 97}
    books = ack_books(row, links(), links(queue_mplex_records=2, queue_pure_acks=9))
    assert books["acks_unaccounted"] == 1


def test_link_totals_add_the_taps_own_drops_where_they_were_read():
    links_ = [{"ab": {"frames_in": 10}, "ba": {"frames_in": 4},
               "a": {"tx_dropped": 3}, "b": {"tx_dropped": 0}},
              {"ab": {"frames_in": 1}, "ba": {}, "a": {"tx_dropped": None}, "b": {}}]
    t = link_totals(links_)
    assert t["frames_in"] == 15 and t["tap_dropped"] == 3
