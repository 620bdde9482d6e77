"""The ``hushmon run`` command: the monitored run (:mod:`hushmon.run`) joined
with the clusters a command may go to (:mod:`hushmon.testbed`)."""
