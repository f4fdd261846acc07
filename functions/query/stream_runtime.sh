#!/bin/sh
# The query function's AWS_LAMBDA_EXEC_WRAPPER: the managed Python runtime's interpreter (the first word of
# the command the runtime gives this script, e.g. /var/lang/bin/python3.12) runs citewise's runtime loop,
# which can stream a response (citewise.api.streaming_runtime; docs/aws.md), instead of AWS's own loop
# (the rest of that command, which is not run).
exec "$1" -m citewise.api.streaming_runtime
