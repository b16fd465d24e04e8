"""The unattended operation of the loop: ``./sitebench nightly``.

The stage after the results and the report: a site runs the suite every night by itself,
one run at a time (:mod:`.lock`), stores and judges it as ``./sitebench run`` does
(:mod:`.suite`), publishes it to the shared results repository, tells someone when it
failed, drifted or did not run (:mod:`.alert`), and keeps a log per night (:mod:`.logs`);
:mod:`.night` puts these together under the exit codes of :mod:`.codes`. The schedule is the
site's own tool: cron (:mod:`.cron`), a systemd timer (:mod:`.systemd`) or Slurm's scrontab
(:mod:`.scrontab`), all running the line of :mod:`.schedule`.
"""
