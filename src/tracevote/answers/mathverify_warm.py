"""Preloaded by the fork server of `MathJudge`'s workers: importing this module imports Math-Verify and makes a
first comparison (~0.5 s in all), so every worker forked from the server starts warm. Nothing else imports it."""

from tracevote.answers.mathverify_worker import warm_up

warm_up()
