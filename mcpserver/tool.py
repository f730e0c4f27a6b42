"""The one tool /mcp serves: its definition, and the server-side check of its arguments."""

from django.conf import settings
from mcp import types

from kb.catalogue import MAX_LIMIT as LIMIT_MAX
from kb.catalogue import MIN_LIMIT as LIMIT_MIN
from kb.catalogue import TOOL_DEFAULT_LIMIT, TOOL_NAME
from kb.questions import Question
from kb.relay import answer_text


class ArgumentError(ValueError):
    """The caller's arguments break the tool's input schema; the message is safe to return."""


def input_schema() -> dict:
    return {
        "type": "object",
        "properties": {
            "prompt": {
                "type": "string",
                "minLength": 1,
                "maxLength": settings.MCP_PROMPT_MAX_LENGTH,
                "description": (
                    "Question in Korean or English (예: 담당 고객의 보험료 상세를 보여줘)"
                ),
            },
            "limit": {
                "type": "integer",
                "minimum": LIMIT_MIN,
                "maximum": LIMIT_MAX,
                "default": TOOL_DEFAULT_LIMIT,
                "description": "Maximum number of rows to return (1-100).",
            },
        },
        "required": ["prompt"],
        "additionalProperties": False,
    }


def tool_definition(output_schema: dict) -> types.Tool:
    return types.Tool(
        name=TOOL_NAME,
        title="KB Select AI (VPD)",
        description=(
            "Answers a Korean or English question about the insurance knowledge base "
            "(customers, contracts, premium payments) with the calling user's VPD row and column "
            "policy applied. Returns rows, masked columns and how the question was understood."
        ),
        input_schema=input_schema(),
        output_schema=output_schema,
        annotations=types.ToolAnnotations(
            read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
        ),
    )


def checked_arguments(arguments: object) -> Question:
    """The question the arguments ask, validated again on the server: never trust that the
    client honoured the schema."""
    if not isinstance(arguments, dict):
        raise ArgumentError("arguments must be an object with prompt and limit")
    unknown = sorted(set(arguments) - {"prompt", "limit"})
    if unknown:
        raise ArgumentError(f"unknown argument(s): {', '.join(unknown)[:200]}")
    prompt = arguments.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise ArgumentError("prompt must be a non-empty string")
    if len(prompt) > settings.MCP_PROMPT_MAX_LENGTH:
        raise ArgumentError(f"prompt is longer than {settings.MCP_PROMPT_MAX_LENGTH} characters")
    limit = arguments.get("limit", TOOL_DEFAULT_LIMIT)
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise ArgumentError("limit must be an integer from 1 to 100")
    if not LIMIT_MIN <= limit <= LIMIT_MAX:
        raise ArgumentError("limit must be an integer from 1 to 100")
    return Question.asked(prompt, limit)


def answer_result(answer: dict) -> types.CallToolResult:
    """The answer as a person or a model reads it (a sentence, a small table, the masked columns)
    in `content`, and whole in `structuredContent`."""
    text = answer_text(answer)
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], structured_content=answer
    )


def error_result(message: str) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=message)], is_error=True
    )
