import logging

log = logging.getLogger(__name__)


def run(job_input):
    log.info("hello from the compatibility suite's sample job")
    job_input.execute_query("INSERT INTO compat_hello VALUES ('hello')")
