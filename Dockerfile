# queuepilot's image: `queuepilot serve` as a non-root user on a read-only root filesystem, where
# only /tmp is written (Kubernetes mounts an emptyDir there). `make image` builds this file with
# buildah and runs it as Kubernetes would (tests/image); .github/workflows/image.yml publishes it.

# Debian's Python (bookworm: 3.11) in both stages, so the virtualenv built here runs there as is.
FROM debian:bookworm-slim AS build
# ca-certificates: Debian's pip trusts the system's certificates (not certifi's) to reach PyPI.
RUN apt-get update \
    && apt-get install --yes --no-install-recommends python3 python3-venv ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && python3 -m venv /opt/queuepilot
# The dependencies alone first, each at the version and with the hashes of the lock file (`make
# lock` writes it from pyproject.toml): the same bytes on every build, and a download that does not
# match is refused. This layer is reused until the lock changes. The extras are in (`aws`: boto3,
# for the `sqs` and `aws-asg` scalers; `github-app`: cryptography, for a GitHub App instead of a
# token), so one image serves every backend; setuptools is there to build the package below.
COPY deploy/image/requirements.txt /tmp/requirements.txt
RUN /opt/queuepilot/bin/pip install --no-cache-dir --require-hashes --no-deps \
        --requirement /tmp/requirements.txt \
    && /opt/queuepilot/bin/pip check
# The context is the package and its metadata only (.dockerignore), and only the installed package
# leaves this stage. Built with the locked setuptools (no build isolation: nothing unpinned is
# downloaded). pip and setuptools are only needed to install: the bot never imports them.
COPY . /src/
# The commit a development version names (`--version`, queuepilot_build_info): the context has no
# .git to ask, so deploy/image/build.sh and the release workflow pass it, and the build records it
# in the package (setup.py), where the running bot reads it: the final stage needs no ENV of it.
ARG QUEUEPILOT_COMMIT=""
RUN /opt/queuepilot/bin/pip install --no-cache-dir --no-deps --no-build-isolation /src \
    && /opt/queuepilot/bin/pip uninstall --yes pip setuptools

FROM debian:bookworm-slim
# ca-certificates: Slack and every other HTTPS backend; tzdata: schedules in named time zones.
RUN apt-get update \
    && apt-get install --yes --no-install-recommends python3 ca-certificates tzdata \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --uid 10001 --user-group --home-dir /nonexistent --no-create-home \
        --shell /usr/sbin/nologin queuepilot
COPY --from=build /opt/queuepilot /opt/queuepilot
# Matplotlib (the trend chart) keeps its font cache in MPLCONFIGDIR: on /tmp, the one writable
# place. Bytecode is compiled into the image already, so nothing else needs writing at run time.
ENV PATH=/opt/queuepilot/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    MPLCONFIGDIR=/tmp/matplotlib
# Numeric, so Kubernetes' runAsNonRoot can tell it is not root without reading /etc/passwd.
USER 10001:10001
EXPOSE 3000
# Exec form: queuepilot is PID 1 and receives SIGTERM itself (uvicorn then shuts down gracefully).
ENTRYPOINT ["queuepilot"]
CMD ["serve"]
