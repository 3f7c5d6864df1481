"""The operators' console (``/console/``): server-rendered pages for auditing matches,
settlements and the ledger in a browser (docs/operations.md).

Operators sign in with the name and password ``ddz operator add`` gave them; the session
is kept in PostgreSQL and named by a signed cookie (HttpOnly, SameSite=Lax), so that
signing out or revoking ends it at once, and every form carries a CSRF token (Flask-WTF),
checked on every POST of the console and nowhere else (the JSON API takes bearer tokens,
which a browser never sends by itself). A page that shows hidden cards (a match's replay)
is written to the audit trail. Auditors read every page; the operators page is for admins.

Every page is in Simplified Chinese and English (Flask-Babel; the catalogue is in
translations/): the browser's Accept-Language chooses, or the switch on every page, whose
cookie wins.

These are HTML pages, not the JSON API: they are left out of openapi.yaml."""

from __future__ import annotations

import csv
import datetime as dt
import functools
import io
import logging
import re
import secrets
import uuid
from collections.abc import Callable, Collection, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

from flask import (
    Blueprint,
    Flask,
    Response,
    abort,
    current_app,
    flash,
    g,
    redirect,
    render_template,
    request,
    session,
    url_for,
)
from flask.sessions import SecureCookieSession, SecureCookieSessionInterface
from flask.typing import ResponseReturnValue
from flask_babel import Babel, get_locale, lazy_gettext, ngettext
from flask_babel import gettext as _
from flask_wtf.csrf import CSRFError, CSRFProtect
from itsdangerous import BadData, URLSafeTimedSerializer
from markdown_it import MarkdownIt
from markupsafe import Markup
from werkzeug.wrappers import Response as WerkzeugResponse

from ..api.services import services
from ..app import audit, standing, work
from ..app.metrics import SIGN_INS_FAILED
from ..config import Config
from ..game import State, explain, initial_state
from ..game.decider import outcome
from ..game.events import (
    BOT,
    BidMade,
    Disconnected,
    HandDealt,
    HandEnded,
    HandShown,
    LandlordChosen,
    Passed,
    Played,
    Reported,
    Resumed,
    Settled,
)
from ..game.record import export
from ..game.settlement import HandResult, multiplier
from ..game.state import evolve
from ..game.views import codes_in_order
from ..rules import RULESETS, ReportChoice
from ..store import MatchNotFound, StoredEvent, ledger, reports
from ..store.operators import ACTIONS, NAME, ROLES, VIAS, OperatorExists
from ..store.ratings import NOT_SETTLED, VOIDED_ALREADY, RatingStore

log = logging.getLogger("ddz.console")
bp = Blueprint("console", __name__, url_prefix="/console", template_folder="templates")
csrf = CSRFProtect()
PER_PAGE = 25
CHART_DAYS = 30
#: The periods the takings chart may show, in days.
PERIODS = (7, 30, 90, 365)
STATUSES = ("open", "playing", "ended")
#: The words the pages show for what the store says in codes: a match's status, a seat's
#: kind (service/store/reports.py), a player's standing, a ledger entry's kind, a role, a
#: phase, an action, a job's state.
WORDS = {
    "open": lazy_gettext("open"),
    "playing": lazy_gettext("playing"),
    "ended": lazy_gettext("ended"),
    "person": lazy_gettext("person"),
    "bot account": lazy_gettext("bot account"),
    "system bot": lazy_gettext("system bot"),
    "empty": lazy_gettext("empty"),
    "active": lazy_gettext("active"),
    "suspended": lazy_gettext("suspended"),
    "banned": lazy_gettext("banned"),
    "stake": lazy_gettext("stake"),
    "rake": lazy_gettext("rake"),
    "penalty": lazy_gettext("penalty"),
    "void": lazy_gettext("void"),
    "correction": lazy_gettext("correction"),
    "admin": lazy_gettext("admin"),
    "auditor": lazy_gettext("auditor"),
    # A match's phases (service/game/state.py), a hand record's actions.
    "new": lazy_gettext("new"),
    "seating": lazy_gettext("seating"),
    "dealing": lazy_gettext("dealing"),
    "bidding": lazy_gettext("bidding"),
    "show_hand": lazy_gettext("show hand (摊打)"),
    "report": lazy_gettext("report (报到)"),
    "bid": lazy_gettext("bid"),
    "play": lazy_gettext("play"),
    "pass": lazy_gettext("pass"),
    # The jobs of the queue by state (service/app/work.py).
    "queued": lazy_gettext("queued"),
    "started": lazy_gettext("started"),
    "failed": lazy_gettext("failed"),
    "scheduled": lazy_gettext("scheduled"),
}
#: The newest entries of the audit trail the system page shows (the audit page has all).
TRAIL_ON_SYSTEM = 20
#: A browser where an operator signed in is known as theirs for this long (a signed
#: cookie): its sign-ins as that operator are not held to the limit on failed sign-ins
#: per name, so that the guesses of others never lock the operator out there.
KNOWN_COOKIE = "ddz_console_known"
KNOWN_SECONDS = 90 * 24 * 3600
#: The languages the console (and the public replay page) speak, by the primary subtag a
#: browser's Accept-Language gives: English, and Simplified Chinese as the platform's
#: operators write it (any Chinese the browser asks for gets it: there is no other).
LANGUAGES = {"en": "en", "zh": "zh_Hans_CN"}
#: The language an operator chose by the switch on every page: it wins over the browser's.
#: Its path is the whole site, so that the public replay page speaks it too.
LANGUAGE_COOKIE = "ddz_language"
LANGUAGE_SECONDS = 365 * 24 * 3600
TRANSLATIONS = Path(__file__).resolve().parent / "translations"


def install(app: Flask, config: Config) -> None:
    app.config.update(
        # One process (tests, a single worker) may draw its own; gunicorn's workers share one.
        SECRET_KEY=config.console_secret or secrets.token_urlsafe(32),
        SESSION_COOKIE_NAME="ddz_console",
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Lax",
        SESSION_COOKIE_SECURE=config.console_secure_cookie,
        SESSION_COOKIE_PATH="/console",
        PERMANENT_SESSION_LIFETIME=dt.timedelta(seconds=config.console_session_seconds),
        # Checked by the console's own hook, not on every POST of the app: the JSON API
        # authenticates by bearer token, which a page of another site cannot send.
        WTF_CSRF_CHECK_DEFAULT=False,
        WTF_CSRF_TIME_LIMIT=None,  # a token lives as long as its session
    )
    csrf.init_app(app)
    Babel(
        app,
        locale_selector=chosen_language,
        default_translation_directories=str(TRANSLATIONS),
    )
    app.jinja_env.globals.update(
        html_lang=html_lang, other_languages=other_languages, chinese=chinese, named=named
    )
    app.session_interface = ConsoleSessions()
    app.register_blueprint(bp)
    app.after_request(_problem_as_page)


#: The problems of the API a console page may meet before it is reached, as the page says
#: them: (title, message).
PROBLEM_PAGES = {
    "malformed_id": (
        lazy_gettext("Not found"),
        lazy_gettext("An id in the address is not one: there is no such page."),
    ),
    "rate_limited": (
        lazy_gettext("Too many requests"),
        lazy_gettext("Too many requests from this address: wait a little and try again."),
    ),
}
#: The headers of a problem that its page keeps.
KEPT_HEADERS = ("Retry-After", "Allow")


def _problem_as_page(response: Response) -> Response:
    """A problem answered under /console/ to a browser (the limit on sign-ins of an
    address, an id in the path that is none, which the API's handlers answer before any
    page is reached) as the console's error page, not raw JSON."""
    if (
        response.mimetype != "application/problem+json"
        or not request.path.startswith("/console/")
        or not request.accept_mimetypes.accept_html
    ):
        return response
    problem = response.get_json(silent=True) or {}
    g.csp_nonce = g.get("csp_nonce") or secrets.token_urlsafe(16)
    title, message = PROBLEM_PAGES.get(problem.get("code", ""), (None, None))
    page = Response(
        render_template(
            "console/error.html",
            title=title or problem.get("title") or _("Error"),
            # The API's own detail (in English) stays beside a message of the page's
            # language: it names the id or the limit.
            message=message or problem.get("detail") or "",
            detail=problem.get("detail") if message else None,
        ),
        status=response.status_code,
        mimetype="text/html",
    )
    for name in KEPT_HEADERS:
        if name in response.headers:
            page.headers[name] = response.headers[name]
    return _policy(page)


def chosen_language() -> str:
    """The locale of a page: the switch's cookie, else the first language of the browser's
    Accept-Language (in its order of preference) that the console speaks, else English."""
    chosen = request.cookies.get(LANGUAGE_COOKIE, "")
    if chosen in LANGUAGES.values():
        return chosen
    for tag, _quality in request.accept_languages:
        found = LANGUAGES.get(tag.split("-")[0].lower())
        if found is not None:
            return found
    return "en"


def html_lang() -> str:
    """The page's ``<html lang>``: its locale as a BCP 47 tag (``zh-Hans-CN``, ``en``)."""
    return str(get_locale() or "en").replace("_", "-")


#: Each language as the switch names it, in its own language.
LANGUAGE_NAMES = {"en": "English", "zh_Hans_CN": "中文"}


def other_languages() -> list[tuple[str, str]]:
    """The switch's choices on a page: each language but the page's, with its name."""
    here = str(get_locale() or "en")
    return [(code, LANGUAGE_NAMES[code]) for code in LANGUAGES.values() if code != here]


class ConsoleSessions(SecureCookieSessionInterface):
    """Sessions only where their cookie is sent (the console's pages): any other request
    gets Flask's empty null session without a look at its cookies. Opening one (a signing
    serializer made anew each time) cost every API command 3-4 % of its CPU."""

    def open_session(self, app: Flask, request: Any) -> SecureCookieSession | None:
        if not request.path.startswith(self.get_cookie_path(app)):
            return None
        return super().open_session(app, request)


@bp.before_request
def _signed_in() -> ResponseReturnValue | None:
    # The page's own style and script run, and nothing else (no other source, no inline
    # script an injected string might bring).
    g.csp_nonce = secrets.token_urlsafe(16)
    # PostgreSQL's text holds no NUL: refused here, not left to fail a query with a 500.
    if any("\x00" in value for values in (request.args, request.form) for value in values.values()):
        abort(400, _("A NUL character has no place in a search or a form."))
    if request.method == "POST":
        csrf.protect()
    g.operator = None
    session_id = session.get("session_id")
    if isinstance(session_id, str):
        # The cookie only names the session: whether it is still open is the database's
        # word, so that signing out or revoking ends it for every copy of the cookie.
        g.operator = services().operators.by_session(session_id)
        if g.operator is None:
            session.clear()
    if g.operator is None and request.endpoint not in ("console.sign_in", "console.language"):
        return redirect(url_for("console.sign_in", next=request.full_path.rstrip("?")))
    return None


@bp.after_request
def _policy(response: Response) -> Response:
    nonce = g.get("csp_nonce", "")
    response.headers["Content-Security-Policy"] = (
        f"default-src 'none'; style-src 'nonce-{nonce}'; script-src 'nonce-{nonce}';"
        " form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    )
    return response


@bp.errorhandler(CSRFError)
def _csrf_refused(exc: CSRFError):
    return render_template("console/error.html", title=_("Refused"), message=exc.description), 400


@bp.errorhandler(400)
def _bad_request(exc):
    return render_template(
        "console/error.html", title=_("Bad request"), message=exc.description
    ), 400


@bp.errorhandler(403)
def _forbidden(_exc):
    return render_template(
        "console/error.html", title=_("Forbidden"), message=_("This page is for admins.")
    ), 403


@bp.errorhandler(404)
def _not_found(_exc):
    return render_template(
        "console/error.html", title=_("Not found"), message=_("There is no such page.")
    ), 404


def admin_only(view: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(view)
    def check(*args: Any, **kwargs: Any) -> Any:
        if not g.operator.admin:
            abort(403)
        return view(*args, **kwargs)

    return check


#: The jokers as the console draws them: as the players call them (小王, 大王).
JOKERS = {"BJ": "小王", "RJ": "大王"}


@bp.app_template_filter("card")
def card_filter(code: str) -> str:
    """A card code as the console shows it: the suit's sign and the rank (10 for T); a
    joker as the players call it."""
    if code in JOKERS:
        return JOKERS[code]
    suit, rank = code[0], code[1]
    return {"S": "♠", "H": "♥", "C": "♣", "D": "♦"}[suit] + ("10" if rank == "T" else rank)


@bp.app_template_filter("word")
def word_filter(code: str) -> str:
    """A code of the store (a status, a seat's kind, a standing, a role) as the page's
    language says it; a code without a word as it is."""
    return str(WORDS.get(code, code))


@bp.app_template_filter("seat_label")
def seat_label_filter(label: str) -> str:
    """A seat as service/store/reports.py labels it, in the page's language: a system bot,
    an empty seat, a bot account's name with its mark; a person's name as it is."""
    if label in (reports.SYSTEM_BOT, reports.EMPTY):
        return str(WORDS[label])
    name, marked, rest = label.rpartition(reports.BOT_ACCOUNT_MARK)
    if marked and not rest:
        return _("%(name)s (bot account)", name=name)
    return label


@bp.app_template_filter("answer")
def answer_filter(value: str) -> str:
    """An answer to 报到 (``play``, ``no_play``, ``decline``) in the page's language."""
    return str(REPORT_ANSWERS.get(value, value))


@bp.app_template_filter("red")
def red_filter(code: str) -> bool:
    return code[0] in "HD" or code == "RJ"


# Signing in and out


def _known_browsers() -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(current_app.secret_key or "", salt="ddz console known browser")


def _known_here(name: str) -> bool:
    """Whether the operator ``name`` signed in from this browser before."""
    try:
        known = _known_browsers().loads(
            request.cookies.get(KNOWN_COOKIE, ""), max_age=KNOWN_SECONDS
        )
    except BadData:
        return False
    return known == name


def _sign_in_page(
    status: int, failed: bool = False, wait: int | None = None
) -> ResponseReturnValue:
    """The form; ``failed``: after a wrong name or password; ``wait``: the seconds before
    the name may be tried again."""
    page = render_template("console/sign_in.html", title=_("Sign in"), failed=failed, wait=wait)
    return page, status, {"Retry-After": str(wait)} if wait else {}


@bp.route("/sign-in", methods=["GET", "POST"])
def sign_in():
    if request.method == "GET":
        return _sign_in_page(200)
    ctx = services()
    name, address = request.form.get("name", ""), request.remote_addr
    # What the trail and the log say of a name that is none an operator may have (a
    # password typed in the wrong field, say): not the name itself.
    said = name if NAME.fullmatch(name) else "(not an operator name)"
    failures = current_app.extensions.get("ddz_sign_in_failures")
    if failures is not None and not _known_here(name):
        wait = failures.wait(name)
        if wait is not None:
            log.warning(
                "console sign-in refused: %s from %s (too many failed sign-ins)", said, address
            )
            SIGN_INS_FAILED.labels("limited").inc()
            return _sign_in_page(429, wait=wait)
    found = ctx.operators.sign_in(name, request.form.get("password", ""))
    if found is None:
        SIGN_INS_FAILED.labels("wrong").inc()
        if failures is not None:
            failures.failed(name)
        ctx.operators.audit(said, "sign_in_failed", "console", address=address)
        log.warning("console sign-in failed: %s from %s", said, address)
        return _sign_in_page(401, failed=True)
    assert found.operator_id is not None  # signing in is for operators with a row
    ctx.operators.audit(found.name, "sign_in", "console", address=address)
    log.info("console sign-in: %s from %s", found.name, address)
    session.clear()  # a new session (and CSRF token) for the operator signing in
    session.permanent = True
    session["session_id"] = ctx.operators.open_session(
        found.operator_id, ctx.config.console_session_seconds
    )
    target = request.args.get("next", "")
    if not _on_site(target, "/console/"):
        target = url_for("console.matches")
    return _redirect_keeping(
        target, KNOWN_COOKIE, _known_browsers().dumps(found.name), KNOWN_SECONDS, "/console"
    )


@bp.route(f"/language/<any({', '.join(LANGUAGES.values())}):code>")
def language(code: str):
    """The switch: keeps the language chosen in a cookie and goes back to the page it was
    chosen on (of the console or a replay page, nowhere else). A preference, not an act:
    a GET, so that the public replay page, which has no session for a CSRF token, has it."""
    target = request.args.get("next", "")
    if not _on_site(target, "/console/", "/replay/"):
        target = url_for("console.home")
    return _redirect_keeping(target, LANGUAGE_COOKIE, code, LANGUAGE_SECONDS, "/")


def _on_site(target: str, *paths: str) -> bool:
    """Whether ``next`` names a page under one of ``paths`` of this site: never another
    site (``//host``), and nothing a header cannot carry (a CR or LF answered 500)."""
    return target.startswith(paths) and not target.startswith("//") and target.isprintable()


def _redirect_keeping(
    target: str, cookie: str, value: str, seconds: int, path: str
) -> WerkzeugResponse:
    """A redirect to ``target`` that sets a lasting cookie, with the session cookie's
    protections (secure as configured, not for scripts, not sent by other sites' posts)."""
    response = redirect(target)
    response.set_cookie(
        cookie,
        value,
        max_age=seconds,
        path=path,
        secure=current_app.config["SESSION_COOKIE_SECURE"],
        httponly=True,
        samesite="Lax",
    )
    return response


@bp.route("/sign-out", methods=["POST"])
def sign_out():
    services().operators.end_session(session["session_id"])
    _audit("sign_out")
    session.clear()
    return redirect(url_for("console.sign_in"))


def _audit(action: str, **what: Any) -> None:
    """What the operator signed in did, to the audit trail (with the client's address)."""
    services().operators.audit(
        g.operator.name, action, "console", address=request.remote_addr, **what
    )


@bp.route("/")
def home():
    return redirect(url_for("console.matches"))


# Matches


def _day(name: str) -> dt.date | None:
    try:
        return dt.date.fromisoformat(request.args.get(name, ""))
    except ValueError:
        return None


def _at() -> reports.At:
    """Where the page asked for starts: after or before a row's key (the pager's links),
    or at a page's number (links from before the lists were read by key still work)."""
    raw = request.args.get("page", "1")
    # Nine digits at most: the page's offset must fit PostgreSQL's bigint.
    if not re.fullmatch(r"[0-9]{1,9}", raw):
        abort(400, _("A page is a number, from 1."))
    after, before = request.args.get("after"), request.args.get("before")
    return reports.At(after or None, None if after else before or None, max(1, int(raw)))


def _listed(search: Callable[..., reports.Page], *args: Any) -> reports.Page:
    try:
        return search(services().pool, *args)
    except reports.BadKey:
        abort(400, _("This page's key was not given by this list: go back to its first page."))


def _chosen(name: str, allowed: Collection[str]) -> str | None:
    """The query's ``name`` when it is one of ``allowed``; None (any) otherwise."""
    value = request.args.get(name)
    return value if value in allowed else None


def _found(
    template: str,
    title: str,
    search: Callable[..., reports.Page],
    query: Any,
    **context: Any,
) -> str:
    """The page asked for of what ``search`` finds for ``query`` (``found`` in the
    template, the page itself ``listed``)."""
    at = _at()
    listed = _listed(search, query, at, PER_PAGE)
    return render_template(
        template,
        title=title,
        found=listed.rows,
        listed=listed,
        page=at.page,
        pages=max(1, -(-listed.total // PER_PAGE)),
        **context,
    )


@bp.route("/matches")
def matches():
    query = reports.MatchQuery(
        player=request.args.get("player") or None,
        status=_chosen("status", STATUSES),
        ruleset=_chosen("ruleset", RULESETS),
        since=_day("since"),
        until=_day("until"),
        sort=_chosen("sort", reports.MATCH_SORTS) or "created",
        descending=request.args.get("order", "desc") != "asc",
    )
    return _found(
        "console/matches.html",
        _("Matches"),
        reports.matches,
        query,
        statuses=STATUSES,
        rulesets=sorted(RULESETS),
    )


def chinese() -> bool:
    """Whether the page speaks Chinese: then the names the players give things stand
    alone; in English they stand beside their English (operators know them)."""
    locale = get_locale()
    return locale is not None and locale.language == "zh"


def named(zh: str, en: str) -> str:
    """A name as the page's language gives it: ``地主`` in Chinese, ``地主 landlord`` in
    English."""
    return zh if chinese() else f"{zh} {en}"


#: The answers to 报到 (docs/rules.md §3).
REPORT_ANSWERS = {
    "play": lazy_gettext("打 (play)"),
    "no_play": lazy_gettext("不打 (no play)"),
    "decline": lazy_gettext("no 报到"),
}


def said(event: Any, state: State) -> str:
    """What the replay says of an event, in the page's language: a play by the name the
    players give it, and who played it (the player, 系统代打 for the system in a player's
    seat, or a system bot); the deal's marked card is drawn apart, as a card; any other
    event as its summary() says it in English (tests/test_registries.py)."""
    seat = getattr(event, "seat", None)
    if isinstance(event, HandDealt):
        return _("dealt; the marked card is with seat %(seat)s:", seat=event.marked_seat)
    if isinstance(event, Played):
        play = named(*explain.PLAY_NAMES.get(event.combination, (event.combination,) * 2))
        count, taken = len(event.cards), state.seats[event.seat]
        if event.by != BOT:
            return ngettext(
                "seat %(seat)s played %(play)s (%(num)d card)",
                "seat %(seat)s played %(play)s (%(num)d cards)",
                count,
                seat=seat,
                play=play,
            )
        if taken is None or taken.bot:
            return ngettext(
                "seat %(seat)s played %(play)s (%(num)d card) by a system bot",
                "seat %(seat)s played %(play)s (%(num)d cards) by a system bot",
                count,
                seat=seat,
                play=play,
            )
        return ngettext(
            "seat %(seat)s played %(play)s (%(num)d card) (系统代打, by the system)",
            "seat %(seat)s played %(play)s (%(num)d cards) (系统代打, by the system)",
            count,
            seat=seat,
            play=play,
        )
    if isinstance(event, BidMade):
        if event.value:
            return _("seat %(seat)s bid %(bid)s", seat=seat, bid=event.value)
        return _("seat %(seat)s passed the bid", seat=seat)
    if isinstance(event, LandlordChosen):
        return _(
            "seat %(seat)s is the landlord at %(bid)s, and takes the bottom",
            seat=seat,
            bid=event.bid,
        )
    if isinstance(event, HandShown):
        if event.value:
            return _("seat %(seat)s showed the hand (摊打)", seat=seat)
        return _("seat %(seat)s did not show the hand", seat=seat)
    if isinstance(event, Reported):
        if event.value == ReportChoice.PLAY:
            return _("seat %(seat)s answered 报到 with play", seat=seat)
        if event.value == ReportChoice.NO_PLAY:
            return _("seat %(seat)s answered 报到 with no_play", seat=seat)
        return _("seat %(seat)s answered 报到 with decline", seat=seat)
    if isinstance(event, Passed):
        return _("seat %(seat)s passed", seat=seat)
    if isinstance(event, Disconnected):
        if event.reason == "deadline":
            return _(
                "seat %(seat)s missed its deadline: taken over, the system plays the seat from"
                " now on (系统代打)",
                seat=seat,
            )
        return _("seat %(seat)s left, the system plays the seat from now on (系统代打)", seat=seat)
    if isinstance(event, Resumed):
        return _("seat %(seat)s took the seat back", seat=seat)
    if isinstance(event, HandEnded):
        if event.result.outcome.winner == "landlord":
            return _("the hand ended: the landlord won")
        return _("the hand ended: the farmers won")
    if isinstance(event, Settled):
        return _("settled in the ledger")
    return str(event.summary())


def replay(stored: list[StoredEvent]) -> list[dict[str, Any]]:
    """The hand step by step from its deal: at each event, every seat's hand (in the order
    the seats see theirs), the bottom, the cards played (if any) and the multiplier as it
    stands once there is a landlord."""
    state, steps = initial_state, []
    for item in stored:
        state = evolve(state, item.event)
        if state.marked_card is None:
            continue  # seating: nothing to show yet
        event = item.event
        factor = None
        if state.landlord is not None and state.table is not None:
            factor = multiplier(
                outcome(state, "landlord").factors, state.table.ruleset.bombs_double
            )
        steps.append(
            {
                "version": item.version,
                "seat": getattr(event, "seat", None),
                "said": said(event, state),
                "marked": state.marked_card.code if isinstance(event, HandDealt) else None,
                "played": codes_in_order(event.cards) if isinstance(event, Played) else [],
                "hands": [codes_in_order(hand) for hand in state.hands],
                "bottom": codes_in_order(state.bottom),
                "landlord": state.landlord,
                "turn": state.turn,
                "multiplier": None if factor is None else str(factor),
                "bombs": state.bombs,
            }
        )
    return steps


#: The table's options as the match page names them (Chinese where the players have a
#: word for it, docs/rules.md §5): the Chinese, and the English beside it in English.
OPTION_NAMES = {
    "unit": ("底分", lazy_gettext("base stake (unit)")),
    "cap": ("封顶", lazy_gettext("cap per hand")),
    "rake": ("系统得分", lazy_gettext("system cut (rake)")),
    "bombs_double": ("炸弹", lazy_gettext("bombs double the score")),
    "turn_seconds": ("", lazy_gettext("seconds per turn (then 系统代打)")),
    "bot_level": ("", lazy_gettext("system bots' level")),
}


def option_name(key: str) -> str:
    """An option of the table as the match page names it, in the page's language."""
    zh, other = OPTION_NAMES.get(key, ("", key))
    if not zh:
        return str(other)
    return named(zh, str(other))


def seat_details(
    state: State, stored: list[StoredEvent], names: dict[str, tuple[str, bool]]
) -> list[dict[str, Any]]:
    """Each seat as an auditor needs it: its player's name and id, what it is (person,
    bot account, system bot) and, when the system took it over (系统代打), since which
    version and why, and whether the player took it back."""
    taken_over: dict[int, StoredEvent] = {}
    for item in stored:
        if isinstance(item.event, Disconnected):
            taken_over.setdefault(item.event.seat, item)
    details = []
    for seat, taken in enumerate(state.seats):
        found: dict[str, Any] = {"seat": seat, "label": reports.seat_label(None, names)}
        if taken is not None:
            found["label"] = reports.seat_label(taken._asdict(), names)
            found["player_id"] = taken.player
            if taken.player is None:
                found["kind"] = reports.SYSTEM_BOT
            else:
                found["name"], bot_account = names.get(taken.player, (taken.player, False))
                found["kind"] = "bot account" if bot_account else "person"
            over = taken_over.get(seat)
            if over is not None:
                assert isinstance(over.event, Disconnected)
                found["taken_over"] = {
                    "version": over.version,
                    "at": over.recorded_at,
                    "reason": over.event.reason,
                    "still": state.disconnected[seat],
                }
        details.append(found)
    return details


def account_name(account: str, names: dict[str, tuple[str, bool]]) -> str:
    """A ledger account as the console names it: the player's name, the system's bots
    or the house."""
    if account == ledger.BOTS:
        return _("system bots")
    if account.startswith("player:"):
        name, bot_account = names.get(account.removeprefix("player:"), (_("(unknown)"), False))
        return _("%(name)s (bot account)", name=name) if bot_account else name
    return _("house") if account == ledger.HOUSE else account


@bp.route("/matches/<uuid:match_id>")
def match(match_id: uuid.UUID):
    ctx = services()
    try:
        stored, loaded = ctx.store.since(match_id, 0)
    except MatchNotFound:
        abort(404)
    state = loaded.state
    document = export(e.event for e in stored)
    verdict: str | None = None
    if state.result is not None:
        # The events and what the ledger books for the match, as the ledger check has them.
        problems = audit.check_match(ctx.pool, ctx.store, match_id)
        verdict = "; ".join(problems) if problems else "ok"
    _audit("replay", match_id=match_id)
    names = reports.player_names(ctx.pool, {s.player for s in state.seats if s and s.player})
    entries = reports.entries(ctx.pool, match_id)
    for entry in entries:
        entry["name"] = account_name(entry["account"], names)
        entry["rule"] = explain.RULE_OF_KIND.get(entry["kind"])
    return render_template(
        "console/match.html",
        title=_("Match %(id)s", id=str(match_id)[:8]),
        match_id=match_id,
        state=state,
        seats=seat_details(state, stored, names),
        options=document.get("options", {}),
        option_name=option_name,
        ruleset=document.get("ruleset"),
        result=document.get("result"),
        explained=(
            explain.explain(state.result, state.table, gettext=_)
            if state.result is not None and state.table is not None
            else None
        ),
        factor_names=explain.NAMES,
        settlement=ledger.settlement(ctx.pool, match_id),
        voided=ledger.voided(ctx.pool, match_id),
        rating_voided=RatingStore(ctx.pool).voided(match_id),
        entries=entries,
        verdict=verdict,
        steps=replay(stored),
    )


# The rules, which the settlements and the ledger entries cite

RULES_FILE = Path(__file__).resolve().parents[2] / "docs" / "rules.md"


@functools.cache
def _rules_html() -> str | None:
    """docs/rules.md as HTML, each heading with the anchor GitHub gives it; None when the
    service runs without its documents (installed as a package)."""
    try:
        text = RULES_FILE.read_text(encoding="utf-8")
    except OSError:
        return None
    html = MarkdownIt("commonmark").enable("table").render(text)

    def anchored(found: re.Match[str]) -> str:
        title = re.sub(r"<[^>]+>", "", found.group(2))
        slug = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
        return f'<h{found.group(1)} id="{slug}">{found.group(2)}</h{found.group(1)}>'

    return re.sub(r"<h([1-6])>(.*?)</h\1>", anchored, html)


@bp.route("/rules")
def rules():
    html = _rules_html()
    if html is None:
        abort(404)
    return render_template(
        "console/rules.html", title=_("Rules (docs/rules.md)"), html=Markup(html)
    )


# The ledger


@bp.route("/ledger")
def ledger_page():
    ctx = services()
    today = dt.datetime.now(dt.UTC).date()
    period = request.args.get("days", str(CHART_DAYS))
    period_days = int(period) if period in {str(n) for n in PERIODS} else CHART_DAYS
    days = reports.house_by_day(ctx.pool, period_days, today)
    top = max((d["rake"] + d["penalty"] for d in days), default=0) or 1
    check = ledger.verdicts(ctx.pool)
    last = check["last_check"]
    return render_template(
        "console/ledger.html",
        title=_("Ledger"),
        check=check,
        unchecked=check["settled"] - check["checked"],
        whole_problems=last["problems"] if last else [],
        running=last is not None and last["running"],
        days=days,
        top=top,
        periods=PERIODS,
        totals={kind: sum((d[kind] for d in days), Decimal(0)) for kind in ("rake", "penalty")},
        since=(today - dt.timedelta(days=CHART_DAYS - 1)).isoformat(),
        until=today.isoformat(),
    )


@bp.route("/ledger/check", methods=["POST"])
@admin_only
def check_ledger():
    """Starts the full check of the ledger in the background. Admins only, as in the API:
    it writes verdicts and takes the workers' time, and an auditor only reads."""
    ctx = services()
    check_id = ledger.start_check(ctx.pool, g.operator.name)
    if check_id is None:
        flash(_("A full check is running already: its progress is below."))
    else:
        _audit("ledger_check", subject=f"full check {check_id}")
        work.check_ledger_later(ctx.redis, check_id)
        flash(
            _(
                "Full check %(check)s started: every settled hand is checked again.",
                check=check_id,
            )
        )
    return redirect(url_for("console.ledger_page"), 303)


#: The settlements CSV's columns: one row per seat per hand (docs/operations.md).
CSV_COLUMNS = (
    "match_id",
    "settled_at",
    "ruleset",
    "unit",
    "cap",
    "rake",
    "bombs_double",
    "seat",
    "player_id",
    "player_name",
    "seat_kind",
    "taken_over",
    "role",
    "winner",
    "bid",
    "multiplier",
    "multiplier_text",
    "factors",
    "gross",
    "after_cap",
    "cut",
    "penalty",
    "net",
)


def csv_row(row: dict[str, Any]) -> list[Any]:
    """A seat's row of the settlements CSV."""
    result, table, seat = HandResult.from_json(row["result"]), row["table"], row["seat"]
    amounts = row["result"]["settlement"]
    kind = reports.SYSTEM_BOT if row["player_id"] is None else "person"
    if row["bot_account"]:
        kind = "bot account"
    m = result.settlement.multiplier
    return [
        row["match_id"],
        row["settled_at"].isoformat(),
        row["ruleset"],
        table["unit"],
        table["cap"] or "",
        table["rake"],
        "yes" if table["bombs_double"] else "no",
        seat,
        row["player_id"] or "",
        row["name"] or "",
        kind,
        "yes" if row["taken_over"] else "no",
        "landlord" if seat == result.outcome.landlord else "farmer",
        result.outcome.winner,
        result.outcome.bid,
        explain.multiplier_decimal(m),
        # As text a spreadsheet keeps: "8/3" alone is read as a date.
        f"×{explain.fraction_text(m)}",
        " × ".join(
            f"{explain.NAMES[key][1]} {text}"
            for key, text in explain.factors_named(result, bool(table["bombs_double"]))
        )
        or "none",
        *(amounts[key][seat] for key in ("gross", "after_cap", "rake", "penalty", "net")),
    ]


@bp.route("/ledger/settlements.csv")
def settlements_csv():
    since, until = _day("since"), _day("until")
    if since is None or until is None or since > until:
        abort(400, _("Give a range of days: since and until, as YYYY-MM-DD, since first."))
    _audit("export", subject=f"settlements {since}..{until}")
    rows = reports.settlements(services().pool, since, until)

    def lines() -> Iterator[str]:
        # Written a row at a time as the rows come from the database's cursor.
        out = io.StringIO()
        writer = csv.writer(out)
        try:
            writer.writerow(CSV_COLUMNS)
            for row in rows:
                writer.writerow(csv_row(row))
                yield out.getvalue()
                out.seek(0)
                out.truncate()
            yield out.getvalue()
        finally:
            rows.close()  # the cursor and its connection back, however the download ends

    return Response(
        lines(),
        mimetype="text/csv",
        headers={"Content-Disposition": f'attachment; filename="settlements-{since}-{until}.csv"'},
    )


# Players


#: The players page's filter: everyone, people only, or bot accounts (authors' programs) only.
PLAYER_KINDS: dict[str, bool | None] = {"": None, "people": False, "bot_accounts": True}


@bp.route("/players")
def players():
    sort = request.args.get("sort", "rate")
    sort = sort if sort in reports.PLAYER_SORTS else "rate"
    descending = request.args.get("order", "desc") != "asc"
    at = _at()
    kind = request.args.get("kind", "")
    kind = kind if kind in PLAYER_KINDS else ""
    search = request.args.get("q", "").strip()
    listed = _listed(reports.players, sort, descending, at, PER_PAGE, PLAYER_KINDS[kind], search)
    columns = {
        "name": _("Player"),
        "balance": _("Balance"),
        "hands": _("Hands"),
        "disconnects": _("Disconnects"),
        "rate": _("Disconnect rate"),
    }
    return render_template(
        "console/players.html",
        title=_("Players"),
        players=listed.rows,
        listed=listed,
        kind=kind,
        search=search,
        sort=sort,
        sort_label=columns.get(sort, sort),
        descending=descending,
        page=at.page,
        pages=max(1, -(-listed.total // PER_PAGE)),
        columns=columns.items(),
    )


#: What an admin may do to a player, and the standing each sets.
STANDING_OF = {"suspend": "suspended", "ban": "banned", "reinstate": "active"}
#: An amount of a correction: up to nine digits, two decimals at most, not zero.
CORRECTION = re.compile(r"-?[0-9]{1,9}(\.[0-9]{1,2})?")


@bp.route("/players/<uuid:player_id>")
def player(player_id: uuid.UUID):
    """A player: profile and standing, balance and ledger history (adjustments with their
    reason), newest hands with the player's net, and their tokens."""
    ctx = services()
    found = reports.player(ctx.pool, player_id)
    if found is None:
        abort(404)
    return render_template(
        "console/player.html",
        title=_("Player %(name)s", name=found["name"]),
        found=found,
        ledger=ledger.player_ledger(ctx.pool, player_id, limit=100),
        tokens=ctx.players.tokens(player_id),
        rule_of_kind=explain.RULE_OF_KIND,
    )


def _reason() -> str | None:
    """The reason the form gives (every act on a player or the ledger needs one)."""
    reason = request.form.get("reason", "").strip()
    return reason[:500] or None


@bp.route("/players/<uuid:player_id>/<any(suspend, ban, reinstate):action>", methods=["POST"])
@admin_only
def player_standing(player_id: uuid.UUID, action: str):
    """Suspends, bans or reinstates the player (admins only), with a reason."""
    ctx, reason = services(), _reason()
    if reason is None:
        flash(_("Say why: the reason goes to the audit trail."))
        return redirect(url_for("console.player", player_id=player_id), 303)
    taken = standing.set_standing(
        ctx.pool, ctx.players, ctx.commands, player_id, STANDING_OF[action]
    )
    if taken is None:
        abort(404)
    _audit(action, subject=f"player {player_id}", reason=reason)
    if action == "reinstate":
        flash(_("Reinstated: the player's tokens work again."))
    else:
        flash(
            ngettext(
                "The player is %(standing)s: their tokens are refused, their lobby tickets"
                " cancelled and the system took over %(num)d seat of a hand under way.",
                "The player is %(standing)s: their tokens are refused, their lobby tickets"
                " cancelled and the system took over %(num)d seats of hands under way.",
                len(taken),
                standing=WORDS[STANDING_OF[action]],
            )
        )
    return redirect(url_for("console.player", player_id=player_id), 303)


@bp.route("/players/<uuid:player_id>/correct", methods=["POST"])
@admin_only
def correct_balance(player_id: uuid.UUID):
    """Corrects the player's balance (admins only): two entries, the player's and the
    house's, with the reason; never an edit of an entry."""
    ctx, reason = services(), _reason()
    amount = request.form.get("amount", "").strip()
    if reports.player(ctx.pool, player_id) is None:
        abort(404)
    if reason is None or not CORRECTION.fullmatch(amount) or Decimal(amount) == 0:
        flash(_("A correction needs an amount (not zero, two decimals at most) and a reason."))
        return redirect(url_for("console.player", player_id=player_id), 303)
    value = Decimal(amount).quantize(Decimal("0.01"))
    adjustment = ledger.correct(ctx.pool, player_id, value, g.operator.name, reason)
    _audit("correct", subject=f"player {player_id}: {value:+.2f}", reason=reason)
    flash(
        _(
            "Correction %(id)s booked: %(player)s to the player, %(house)s to the house.",
            id=adjustment,
            player=f"{value:+.2f}",
            house=f"{-value:+.2f}",
        )
    )
    return redirect(url_for("console.player", player_id=player_id), 303)


@bp.route("/matches/<uuid:match_id>/void", methods=["POST"])
@admin_only
def void_hand(match_id: uuid.UUID):
    """Voids a settled hand (admins only): entries that undo each of its entries, with
    the reason; the hand's own entries stay."""
    ctx, reason = services(), _reason()
    if ledger.settlement(ctx.pool, match_id) is None:
        abort(404)
    if reason is None:
        flash(_("Say why: the reason goes to the audit trail."))
    elif ledger.void(ctx.pool, match_id, g.operator.name, reason) is None:
        flash(_("This hand was voided already."))
    else:
        _audit("void", match_id=match_id, reason=reason)
        flash(_("The hand is voided: every amount it moved is moved back."))
    return redirect(url_for("console.match", match_id=match_id), 303)


@bp.route("/matches/<uuid:match_id>/void-rating", methods=["POST"])
@admin_only
def void_rating(match_id: uuid.UUID):
    """Voids a settled hand's rating effect (admins only), with the reason: each rating
    change it made is taken back, and ``ddz ratings rebuild`` leaves it out."""
    reason = _reason()
    if reason is None:
        flash(_("Say why: the reason goes to the audit trail."))
        return redirect(url_for("console.match", match_id=match_id), 303)
    done = RatingStore(services().pool).void(match_id, g.operator.name, reason)
    if done == NOT_SETTLED:
        abort(404)
    if done == VOIDED_ALREADY:
        flash(_("This hand's rating was voided already."))
    else:
        _audit("void_rating", match_id=match_id, reason=reason)
        flash(_("The hand's rating is voided: every rating change it made is taken back."))
    return redirect(url_for("console.match", match_id=match_id), 303)


@bp.route("/operators/<any(set_role, reset_password):action>", methods=["POST"])
@admin_only
def change_operator(action: str):
    """Gives another operator a role, or a new password (which ends their sessions)."""
    ctx, name = services(), request.form.get("name", "")
    role, password = request.form.get("role", ""), request.form.get("password", "")
    if name == g.operator.name:
        flash(_("Another admin may change your account; you may not."))
    elif name not in {found.name for found, _ in ctx.operators.all()}:
        flash(_("There is no operator named %(name)s.", name=name))
    elif action == "set_role" and role not in ROLES:
        flash(_("A role is one of %(roles)s.", roles=", ".join(ROLES)))
    elif action == "reset_password" and len(password) < 12:
        flash(_("A password of at least 12 characters, please."))
    elif action == "set_role":
        ctx.operators.set_role(name, role)
        _audit(action, subject=f"{name}: {role}")
        flash(_("%(name)s is now %(role)s.", name=name, role=role))
    else:
        ctx.operators.reset_password(name, password)
        _audit(action, subject=name)
        flash(_("%(name)s's password is reset and their console sessions ended.", name=name))
    return redirect(url_for("console.operators"), 303)


# The system


@bp.route("/system")
def system():
    ctx = services()
    unsettled, oldest = ctx.store.unsettled()
    return render_template(
        "console/system.html",
        title=_("System"),
        workers=work.workers_alive(ctx.redis),
        depths=work.depths(ctx.redis),
        unsettled=unsettled,
        oldest=oldest,
        trail=ctx.operators.trail(TRAIL_ON_SYSTEM),
    )


@bp.route("/audit")
def audit_page():
    query = reports.AuditQuery(
        operator=request.args.get("operator") or None,
        action=_chosen("action", ACTIONS),
        via=_chosen("via", VIAS),
        about=request.args.get("about") or None,
        since=_day("since"),
        until=_day("until"),
    )
    return _found(
        "console/audit.html",
        _("Audit trail"),
        reports.audit_trail,
        query,
        actions=ACTIONS,
        vias=VIAS,
    )


# Operators (admins only)


@bp.route("/operators", methods=["GET", "POST"])
@admin_only
def operators():
    ctx = services()
    if request.method == "POST":
        name = request.form.get("name", "").strip()
        role = request.form.get("role", "")
        password = request.form.get("password", "")
        if role not in ROLES or len(password) < 12:
            flash(_("A name, a role and a password of at least 12 characters, please."))
        else:
            try:
                ctx.operators.add(name, role, password)
            except (OperatorExists, ValueError) as exc:
                flash(str(exc))
            else:
                _audit("add", subject=name)
                flash(_("Operator %(name)s added (%(role)s).", name=name, role=role))
        # After a POST, a page to GET: reloading it posts nothing again.
        return redirect(url_for("console.operators"), 303)
    return render_template(
        "console/operators.html",
        title=_("Operators"),
        operators=ctx.operators.all(),
        roles=ROLES,
    )


@bp.route("/operators/<any(revoke, remove):action>", methods=["POST"])
@admin_only
def manage_operator(action: str):
    """Revokes an operator (their API tokens, console sessions and password), or removes
    the operator."""
    ctx, name = services(), request.form.get("name", "")
    if name == g.operator.name:
        flash(
            _("Another admin may revoke you; you may not.")
            if action == "revoke"
            else _("Another admin may remove you; you may not.")
        )
    elif name not in {found.name for found, _ in ctx.operators.all()}:
        flash(_("There is no operator named %(name)s.", name=name))
    elif action == "remove" and request.form.get("confirm") != "yes":
        flash(_("Tick 'sure' to remove %(name)s: removing cannot be undone.", name=name))
    else:
        _audit(action, subject=name)
        if action == "revoke":
            count = ctx.operators.revoke(name)
            flash(
                ngettext(
                    "%(num)d token of %(name)s revoked, sessions ended, password refused.",
                    "%(num)d tokens of %(name)s revoked, sessions ended, password refused.",
                    count,
                    name=name,
                )
            )
        else:
            ctx.operators.remove(name)
            flash(_("Operator %(name)s removed, with their tokens and sessions.", name=name))
    return redirect(url_for("console.operators"), 303)
