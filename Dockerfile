# shardproxy image: the proxy only, no test extras. Configuration is mounted at /app/conf
# (ShardingSphere-Proxy 5.x layout: global.yaml + database-*.yaml); see docker-compose.yml.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    SHARDPROXY_CONF=/app/conf \
    SHARDPROXY_HOST=0.0.0.0 \
    SHARDPROXY_PORT=3307 \
    SHARDPROXY_LOG_JSON=1

WORKDIR /src

# Dependencies first, read from pyproject.toml, so a code change does not reinstall them. All of
# them ship manylinux wheels for CPython 3.11, so the slim image needs no compiler.
COPY pyproject.toml ./
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" \
        > /tmp/requirements.txt \
    && pip install --no-cache-dir -r /tmp/requirements.txt \
    && rm /tmp/requirements.txt

# .dockerignore keeps tests, docs and docker/ out of the build context.
COPY . ./
RUN pip install --no-cache-dir --no-deps . \
    && rm -rf /src \
    && useradd --system --uid 10001 --no-create-home --home-dir /app --shell /usr/sbin/nologin shardproxy \
    && mkdir -p /app/conf /app/state \
    && chown shardproxy /app/state

WORKDIR /app
USER shardproxy

# /app/conf may be read-only; what the proxy writes (props.proxy-state-directory: DistSQL-changed
# database-*.yaml files, the XA log) goes to /app/state when the configuration points there
VOLUME ["/app/state"]
# 3307: MySQL clients; 9100: metrics, /healthz, /readyz, /status (when props.proxy-metrics-port is 9100)
EXPOSE 3307 9100

# Healthy once the proxy answers a TCP connect with a MySQL handshake (protocol version 10).
HEALTHCHECK --interval=10s --timeout=5s --start-period=15s --retries=3 \
    CMD ["python", "-c", "import os,socket,sys; s=socket.create_connection(('127.0.0.1',int(os.environ.get('SHARDPROXY_PORT','3307'))),3); s.settimeout(3); h=s.makefile('rb').read(5); sys.exit(0 if len(h)==5 and h[4]==10 else 1)"]

# docker stop sends SIGTERM: the proxy drains for props.proxy-shutdown-grace-seconds (default 30); give the
# container that long (docker stop -t 40, compose stop_grace_period) or the drain is cut by SIGKILL.
# Settings come from the environment (SHARDPROXY_CONF, _HOST, _PORT, _LOG_LEVEL, _LOG_JSON); JSON logs by
# default. An empty or missing /app/conf stops the start with a clear error instead of serving nothing.
CMD ["shardproxy", "serve"]
