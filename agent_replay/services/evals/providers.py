"""One call to an AI provider through its official SDK: Anthropic (``anthropic``, Messages
API), Google (``google-genai``, Gemini ``generateContent``) or OpenAI (``openai``, Chat
Completions).

Which provider, model and key (``resolve_ai``): ``--provider``/``--model`` flags, else
``ai.provider``/``ai.model`` from the config; a model name alone implies its provider
(``claude-*`` Anthropic, ``gemini-*`` Google, ``gpt-*``/``o1``/``o3``/``o4`` OpenAI); else the
first provider with a key, in the order Anthropic, Google, OpenAI; the model defaults to the
provider's cheapest (``config.DEFAULT_MODELS``). Keys come from the environment first
(``ANTHROPIC_API_KEY``, ``GOOGLE_API_KEY``/``GEMINI_API_KEY``, ``OPENAI_API_KEY``), then the
config file.

Endpoints: ``ai.base_urls.<provider>`` when set, else the SDK's own default, which honours
``ANTHROPIC_BASE_URL``, ``GOOGLE_GEMINI_BASE_URL`` and ``OPENAI_BASE_URL``.

Retries: HTTP 408/409/429/5xx and network errors are retried by the SDKs themselves
(``max_retries`` more attempts; Anthropic and OpenAI honour ``retry-after``, Google backs off
exponentially from ``retry_delay_s``). Failures surface as ``AIAuthError`` (a rejected key) or
``AIRequestError`` (anything else), naming the provider and what it said.

The SDKs are imported inside the calls (0.5-3 s each): nothing here costs anything until an AI
call is actually made.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast

from agent_replay.config import (
    DEFAULT_MODELS,
    ENV_KEYS,
    PROVIDER_LABELS,
    PROVIDERS,
    Config,
    ProviderName,
)
from agent_replay.errors import UsageError
from agent_replay.services.evals.errors import AIAuthError, AIRequestError, NoAIKeyError
from agent_replay.services.evals.prices import estimate_tokens

if TYPE_CHECKING:  # deferred at run time: the SDK costs ~0.5 s to import
    from anthropic.types import MessageParam

MODEL_PREFIXES: tuple[tuple[str, ProviderName], ...] = (
    ("claude", "anthropic"),
    ("gemini", "google"),
    ("gemma", "google"),
    ("gpt", "openai"),
    ("chatgpt", "openai"),
    ("o1", "openai"),
    ("o3", "openai"),
    ("o4", "openai"),
)


def provider_for_model(model: str | None) -> ProviderName | None:
    """The provider a model name belongs to (``None`` when the name doesn't say).

    ``anthropic/claude-...`` and ``models/gemini-...`` forms are understood too.
    """
    if not model:
        return None
    name = model.strip().lower()
    if "/" in name:
        head, _, tail = name.partition("/")
        if head in PROVIDERS:
            return head
        name = tail
    for prefix, provider in MODEL_PREFIXES:
        if name == prefix or name.startswith((f"{prefix}-", f"{prefix}.")):
            return provider
    return None


@dataclass(frozen=True)
class AISettings:
    """Everything one AI call needs: the provider, model, key and limits."""

    provider: ProviderName
    model: str
    api_key: str = field(repr=False)
    key_source: str = "file"
    """Where the key came from: ``$ANTHROPIC_API_KEY``, ``file``, ..."""
    base_url: str | None = None
    """``None``: the SDK's default (and its ``*_BASE_URL`` environment variable)."""
    max_tokens: int = 1024
    """Most tokens a reply may use."""
    timeout_s: float = 60.0
    max_retries: int = 2
    """Retries after the first attempt on 408/409/429/5xx and network errors."""
    retry_delay_s: float = 0.5
    """First back-off delay where the SDK takes one (google-genai)."""

    @property
    def label(self) -> str:
        """``Anthropic claude-haiku-4-5-20251001``."""
        return f"{PROVIDER_LABELS[self.provider]} {self.model}"


def resolve_ai(
    config: Config,
    *,
    provider: str | None = None,
    model: str | None = None,
    env: Mapping[str, str] | None = None,
) -> AISettings:
    """Pick the provider, model and key (see the module doc).

    Args:
        config: the loaded settings.
        provider: ``--provider`` (overrides ``ai.provider``).
        model: ``--model`` (overrides ``ai.model``).
        env: the environment (default ``os.environ``).

    Raises:
        UsageError: an unknown provider, or a model that belongs to another provider.
        NoAIKeyError: no key for the chosen provider, or none at all.
    """
    ai = config.ai
    if provider is not None and provider not in PROVIDERS:
        raise UsageError(f"unknown provider {provider!r}; expected one of {', '.join(PROVIDERS)}")
    chosen: ProviderName | None
    chosen_model: str | None
    if model:
        implied = provider_for_model(model)
        chosen = provider or implied or ai.provider
        if provider and implied and implied != provider:
            raise UsageError(
                f"model {model!r} is not a {PROVIDER_LABELS[provider]} model",
                hints=[f"use --provider {implied}, or a {PROVIDER_LABELS[provider]} model"],
            )
        chosen_model = model
    elif provider:
        chosen = provider
        # ai.model applies only when it is this provider's (or names no provider at all).
        configured_for = provider_for_model(ai.model) or ai.provider or provider
        chosen_model = ai.model if configured_for == provider else None
    else:
        implied = provider_for_model(ai.model)
        if ai.provider and implied and implied != ai.provider:
            raise UsageError(
                f"ai.model {ai.model!r} is not a {PROVIDER_LABELS[ai.provider]} model "
                f"but ai.provider is {ai.provider}",
                hints=["fix one: agent-replay config set ai.model NAME (or unset it)"],
            )
        chosen = ai.provider or implied
        chosen_model = ai.model
    if chosen is None:
        for candidate in PROVIDERS:
            if ai.api_key(candidate, env)[0]:
                chosen = candidate
                break
        else:
            raise NoAIKeyError()
    key, source = ai.api_key(chosen, env)
    if not key:
        raise NoAIKeyError(chosen)
    if chosen_model and "/" in chosen_model and chosen_model.split("/", 1)[0] in PROVIDERS:
        chosen_model = chosen_model.split("/", 1)[1]
    return AISettings(
        provider=chosen,
        model=chosen_model or DEFAULT_MODELS[chosen],
        api_key=key,
        key_source=source or "file",
        base_url=getattr(ai.base_urls, chosen),
        max_tokens=ai.max_tokens,
    )


# --- one call --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Message:
    """One turn of a conversation sent to the model."""

    role: Literal["user", "assistant"]
    text: str


@dataclass(frozen=True)
class Completion:
    """The model's reply and what it used."""

    text: str
    input_tokens: int
    output_tokens: int
    model: str
    """The model that answered (as the provider reported it, else as asked)."""
    stop_reason: str | None
    latency_ms: float
    usage_reported: bool = True
    """``False`` when the provider reported no usage (the counts are estimates)."""
    truncated: bool = False
    """The reply hit the token limit."""


class ProviderClient(Protocol):
    """An open SDK client for one provider."""

    settings: AISettings

    def complete(
        self,
        system: str,
        messages: Sequence[Message],
        *,
        max_tokens: int | None = None,
        json_reply: bool = True,
        temperature: float | None = None,
    ) -> Completion:
        """Send one request and return the reply.

        Raises:
            AIAuthError, AIRequestError: see the module doc.
        """
        ...

    def close(self) -> None: ...


def open_client(settings: AISettings) -> ProviderClient:
    """An SDK client for ``settings.provider`` (imports that SDK)."""
    if settings.provider == "anthropic":
        return _AnthropicClient(settings)
    if settings.provider == "google":
        return _GoogleClient(settings)
    return _OpenAIClient(settings)


def _auth_hint(settings: AISettings) -> list[str]:
    names = " or ".join(ENV_KEYS[settings.provider])
    where = (
        f"the key comes from {settings.key_source}"
        if settings.key_source.startswith("$")
        else f"the key comes from ai.api_keys.{settings.provider} in config.json"
    )
    return [where, f"set a valid key in {names}, then try: agent-replay config test-ai"]


def _request_hints(settings: AISettings, status: int | None) -> list[str]:
    if status in (400, 404):
        return [f"check the model name ({settings.model}): agent-replay config set ai.model NAME"]
    if status == 429:
        return ["the provider is rate-limiting this key; wait and retry"]
    return []


def _estimate(system: str, messages: Sequence[Message], text: str) -> tuple[int, int]:
    prompt = system + "".join(m.text for m in messages)
    return estimate_tokens(prompt), estimate_tokens(text)


class _AnthropicClient:
    def __init__(self, settings: AISettings) -> None:
        import anthropic  # deferred: ~1-3 s, AI paths only

        self.settings = settings
        self._sdk = anthropic
        self._client = anthropic.Anthropic(
            api_key=settings.api_key,
            base_url=settings.base_url,
            max_retries=settings.max_retries,
            timeout=settings.timeout_s,
        )

    def complete(
        self,
        system: str,
        messages: Sequence[Message],
        *,
        max_tokens: int | None = None,
        json_reply: bool = True,
        temperature: float | None = None,
    ) -> Completion:
        sdk, s = self._sdk, self.settings
        options: dict[str, Any] = {}
        if temperature is not None:
            # The SDK no longer types sampling parameters (current models fix them); a rerun
            # of a recorded call on an older model still sends the temperature it used.
            options["extra_body"] = {"temperature": temperature}
        turns = cast("list[MessageParam]", [{"role": m.role, "content": m.text} for m in messages])
        started = time.monotonic()
        try:
            reply = self._client.messages.create(
                model=s.model,
                max_tokens=max_tokens or s.max_tokens,
                system=system,
                messages=turns,
                **options,
            )
        except (sdk.AuthenticationError, sdk.PermissionDeniedError) as exc:
            raise AIAuthError(
                scrub(f"Anthropic rejected the API key ({exc.status_code}: {_message(exc)})", s),
                hints=_auth_hint(s),
            ) from None
        except sdk.APIStatusError as exc:
            raise _status_error("Anthropic", s, exc.status_code, _message(exc)) from None
        except sdk.APIConnectionError as exc:
            raise _connection_error("Anthropic", s, exc) from None
        except ValueError:  # a JSON content type over a body that is not JSON
            raise _not_json("Anthropic", s) from None
        if not isinstance(reply, sdk.types.Message):  # the raw text of a non-JSON reply
            raise _not_json("Anthropic", s, reply)
        latency = (time.monotonic() - started) * 1000
        text = "".join(
            getattr(block, "text", "") or ""
            for block in reply.content or []
            if getattr(block, "type", None) == "text"
        )
        usage = reply.usage
        if usage is not None and usage.input_tokens is not None:
            input_tokens = int(usage.input_tokens or 0)
            input_tokens += int(getattr(usage, "cache_creation_input_tokens", 0) or 0)
            input_tokens += int(getattr(usage, "cache_read_input_tokens", 0) or 0)
            output_tokens, reported = int(usage.output_tokens or 0), True
        else:
            (input_tokens, output_tokens), reported = _estimate(system, messages, text), False
        stop = reply.stop_reason
        return Completion(
            text,
            input_tokens,
            output_tokens,
            reply.model or s.model,
            stop,
            latency,
            reported,
            truncated=stop == "max_tokens",
        )

    def close(self) -> None:
        self._client.close()


class _OpenAIClient:
    def __init__(self, settings: AISettings) -> None:
        import openai  # deferred: ~1 s, AI paths only

        self.settings = settings
        self._sdk = openai
        self._client = openai.OpenAI(
            api_key=settings.api_key,
            base_url=settings.base_url,
            max_retries=settings.max_retries,
            timeout=settings.timeout_s,
        )

    def complete(
        self,
        system: str,
        messages: Sequence[Message],
        *,
        max_tokens: int | None = None,
        json_reply: bool = True,
        temperature: float | None = None,
    ) -> Completion:
        sdk, s = self._sdk, self.settings
        options: dict[str, Any] = {}
        if json_reply:
            options["response_format"] = {"type": "json_object"}
        # Reasoning models (gpt-5*, o-series) accept only the default temperature.
        if temperature is not None and not _openai_reasoning(s.model):
            options["temperature"] = temperature
        sent = [{"role": "system", "content": system}] + [
            {"role": m.role, "content": m.text} for m in messages
        ]
        started = time.monotonic()
        try:
            reply = self._client.chat.completions.create(
                model=s.model,
                messages=sent,  # type: ignore[arg-type]
                max_completion_tokens=max_tokens or s.max_tokens,
                **options,
            )
        except (sdk.AuthenticationError, sdk.PermissionDeniedError) as exc:
            raise AIAuthError(
                scrub(f"OpenAI rejected the API key ({exc.status_code}: {_message(exc)})", s),
                hints=_auth_hint(s),
            ) from None
        except sdk.APIStatusError as exc:
            raise _status_error("OpenAI", s, exc.status_code, _message(exc)) from None
        except sdk.APIConnectionError as exc:
            raise _connection_error("OpenAI", s, exc) from None
        except ValueError:  # a JSON content type over a body that is not JSON
            raise _not_json("OpenAI", s) from None
        if not isinstance(reply, sdk.types.chat.ChatCompletion):  # a non-JSON reply's text
            raise _not_json("OpenAI", s, reply)
        latency = (time.monotonic() - started) * 1000
        choice = reply.choices[0] if reply.choices else None
        text = (choice.message.content or "") if choice is not None else ""
        stop = choice.finish_reason if choice is not None else None
        usage = reply.usage
        if usage is not None and usage.prompt_tokens is not None:
            input_tokens, output_tokens = int(usage.prompt_tokens), int(usage.completion_tokens)
            reported = True
        else:
            (input_tokens, output_tokens), reported = _estimate(system, messages, text), False
        return Completion(
            text,
            input_tokens,
            output_tokens,
            reply.model or s.model,
            stop,
            latency,
            reported,
            truncated=stop == "length",
        )

    def close(self) -> None:
        self._client.close()


def _openai_reasoning(model: str) -> bool:
    name = model.lower()
    return name.startswith(("gpt-5", "o1", "o3", "o4"))


class _GoogleClient:
    def __init__(self, settings: AISettings) -> None:
        from google import genai  # deferred: ~0.5 s, AI paths only
        from google.genai import errors, types

        self.settings = settings
        self._types = types
        self._errors = errors
        retry = types.HttpRetryOptions(
            attempts=settings.max_retries + 1,
            initial_delay=settings.retry_delay_s,
            max_delay=max(settings.retry_delay_s * 8, settings.retry_delay_s),
            jitter=settings.retry_delay_s / 2,
        )
        options = types.HttpOptions(
            base_url=settings.base_url,
            timeout=int(settings.timeout_s * 1000),
            retry_options=retry,
        )
        # Held for the client's lifetime: google-genai closes its HTTP client when the
        # Client object is garbage-collected.
        self._client = genai.Client(api_key=settings.api_key, http_options=options)

    def complete(
        self,
        system: str,
        messages: Sequence[Message],
        *,
        max_tokens: int | None = None,
        json_reply: bool = True,
        temperature: float | None = None,
    ) -> Completion:
        types, errors, s = self._types, self._errors, self.settings
        config = types.GenerateContentConfig(
            system_instruction=system,
            max_output_tokens=max_tokens or s.max_tokens,
            temperature=temperature,
            response_mime_type="application/json" if json_reply else None,
        )
        contents = [
            types.Content(
                role="model" if m.role == "assistant" else "user",
                parts=[types.Part(text=m.text)],
            )
            for m in messages
        ]
        started = time.monotonic()
        try:
            reply = self._client.models.generate_content(
                model=s.model,
                contents=contents,
                config=config,
            )
        except errors.APIError as exc:
            code = int(exc.code) if exc.code is not None else None
            message = exc.message or str(exc)
            details = str(exc.details or "")
            if code in (401, 403) or "API_KEY_INVALID" in details or "API key not valid" in message:
                raise AIAuthError(
                    scrub(f"Google rejected the API key ({code}: {message})", s),
                    hints=_auth_hint(s),
                ) from None
            raise _status_error("Google", s, code, message) from None
        except ValueError:  # the SDK parses the body as JSON whatever its content type
            raise _not_json("Google", s) from None
        except Exception as exc:  # the SDK lets httpx transport errors through unwrapped
            if _is_transport_error(exc):
                raise _connection_error("Google", s, exc) from None
            raise
        latency = (time.monotonic() - started) * 1000
        text_parts: list[str] = []
        stop = None
        candidates = reply.candidates or []
        if candidates:
            candidate = candidates[0]
            stop = str(candidate.finish_reason.value) if candidate.finish_reason else None
            for part in (candidate.content.parts if candidate.content else None) or []:
                if part.text and not part.thought:
                    text_parts.append(part.text)
        text = "".join(text_parts)
        usage = reply.usage_metadata
        if usage is not None and usage.prompt_token_count is not None:
            input_tokens = int(usage.prompt_token_count or 0)
            output_tokens = int(usage.candidates_token_count or 0)
            output_tokens += int(usage.thoughts_token_count or 0)
            reported = True
        else:
            (input_tokens, output_tokens), reported = _estimate(system, messages, text), False
        return Completion(
            text,
            input_tokens,
            output_tokens,
            reply.model_version or s.model,
            stop,
            latency,
            reported,
            truncated=stop == "MAX_TOKENS",
        )

    def close(self) -> None:
        self._client.close()


def _is_transport_error(exc: BaseException) -> bool:
    return any(
        cls.__module__.split(".")[0] in ("httpx", "httpx2", "httpcore", "httpcore2")
        for cls in type(exc).__mro__
    ) or isinstance(exc, OSError)


def scrub(text: str, settings: AISettings) -> str:
    """``text`` with the API key masked, should a provider's message ever echo it."""
    from agent_replay.config import mask

    key = settings.api_key
    return text.replace(key, mask(key)) if key and len(key) >= 8 else text


def _message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
        if isinstance(body.get("message"), str):  # openai passes the error object itself
            return str(body["message"])
    return str(getattr(exc, "message", None) or exc)


RETRIED_STATUSES = frozenset({408, 409, 429})


def _status_error(provider: str, s: AISettings, status: int | None, message: str) -> AIRequestError:
    retried = status is not None and (status in RETRIED_STATUSES or status >= 500)
    attempts = f" after {s.max_retries + 1} attempts" if retried and s.max_retries else ""
    return AIRequestError(
        scrub(f"{provider} API error {status}{attempts}: {message}", s),
        status=status,
        hints=_request_hints(s, status),
    )


def _not_json(provider: str, s: AISettings, body: Any = None) -> AIRequestError:
    """A 200 whose body is not the API's JSON: a proxy, captive portal or gateway answered.

    The SDKs either raise ``ValueError`` (a JSON content type over other text) or hand back
    the raw text as the reply (``text/html``); both end here, as a failed call."""
    where = s.base_url or "its default endpoint"
    shown = ""
    if isinstance(body, bytes | str):
        text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
        text = " ".join(text.split())
        shown = f": {text[:120]!r}" if text else ": an empty body"
    return AIRequestError(
        scrub(f"the {provider} API at {where} answered 200 with a body that is not JSON{shown}", s),
        hints=[
            "a proxy or gateway in front of the API may have answered instead: check "
            f"ai.base_urls.{s.provider} or the *_BASE_URL environment variables"
        ],
    )


def _connection_error(provider: str, s: AISettings, exc: BaseException) -> AIRequestError:
    where = s.base_url or "its default endpoint"
    reason = str(exc) or type(exc).__name__
    return AIRequestError(
        scrub(f"cannot reach the {provider} API at {where}: {reason}", s),
        hints=["check the network, or ai.base_urls / the *_BASE_URL environment variables"],
    )
