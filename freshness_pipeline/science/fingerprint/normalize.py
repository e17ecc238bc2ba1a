"""Text without the tokens that change while the content does not.

Numbers are content (a price, a count, a score, a year in a sentence, a phone number), so only
the ones known to move by themselves go: dates, clock times, relative times, view and like
counters and visitor counters, copyright years, how long the page took and which machine
served it, and identifiers (hex and base64 tokens, UUIDs, runs of 10+ digits: ids, epoch
timestamps with their fraction, cache busters). A number that only looks like a date or a time
stays: "28:25" is a score (no hour 28), "2.4.10" a version and "123-45-67" a phone number (no
month 45, and a two-digit year only after a two-digit day and month).

A byline moves in the page's own language, so dates, times, relative times and view counters
are known in the major languages of the web (and in scripts without spaces a number glued to a
word still stands alone: "更新于14:03", "3時間前"). Their words (month and weekday names, "hier",
"fa", "mar", "set") are also content words, so one goes only where a number makes it a date.

Speed: Python's regex engine skips quickly only to the characters a pattern can start with.
So every pattern here starts at a digit (or, for identifiers, an upper-case letter), which
ordinary prose has few of, and the rare forms that begin with a word ("Nov 30", "Views: 12",
"© 2026", "Monday, ...", "vor 5 Minuten") are found from their digit, with look-behinds or a
look back in Python at the few matches. Word lists are tries (the engine tries the branches of
an alternation one by one), and an ASCII text is matched by a pattern without the words and
forms that are not ASCII.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from freshness_pipeline.science.fingerprint.whitespace import fold_spaces

__all__ = ["normalize_content"]


def _one_of(words: Iterable[str]) -> str:
    """A group matching any of ``words``, longest first, as a trie: one branch per character
    tried instead of one per word. Matches nothing when there are no words."""
    tree: dict[str, Any] = {}
    for word in words:
        node = tree
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}

    def emit(node: dict[str, Any]) -> str:
        branches = [re.escape(char) + emit(child) for char, child in sorted(node.items()) if char]
        if not branches:
            return ""
        if len(branches) == 1 and "" not in node:
            return branches[0]
        group = f"(?:{'|'.join(branches)})"
        return f"{group}?" if "" in node else group

    return f"(?:{emit(tree)})" if tree else "(?!)"


def _words(text: str) -> list[str]:
    """The words of ``text``, an underscore standing for a space within one."""
    return [word.replace("_", " ") for word in text.split()]


# Scripts written without spaces between words (Thai, Lao, Myanmar, Khmer, Hangul, kana, Han):
# a number touching their letters is a word of its own; one touching a Latin, Cyrillic, Greek
# or Arabic letter is part of a token ("abc123", "mp3").
_UNSPACED = (
    "\u0e00-\u0eff\u1000-\u109f\u1100-\u11ff\u1780-\u17ff\u3005-\u3007\u3040-\u30ff"
    "\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
    "\uff66-\uffdc\U00020000-\U0003ffff"
)
_W = f"[^\\W{_UNSPACED}]"  # a word character of a spaced script
_L = f"[^\\W\\d_{_UNSPACED}]"  # a letter of a spaced script

# Month names after a day number ("30 nov", "6 de dezembro", "6 декабря", "٦ ديسمبر").
_MONTHS = _words("""jan january feb february mar march apr april may jun june jul july aug august
    sep sept september oct october nov november dec december januar februar märz mai juni juli
    oktober dezember janvier février mars avril juin juillet août septembre octobre novembre
    décembre enero febrero marzo abril mayo junio julio agosto septiembre octubre noviembre
    diciembre gennaio febbraio aprile maggio giugno luglio settembre ottobre dicembre janeiro
    fevereiro março maio junho julho setembro outubro dezembro januari februari maart mei
    augustus stycznia lutego marca kwietnia maja czerwca lipca sierpnia września października
    listopada grudnia января февраля марта апреля мая июня июля августа сентября октября ноября
    декабря січня лютого березня квітня травня червня липня серпня вересня жовтня листопада
    грудня يناير فبراير مارس أبريل إبريل ابريل مايو يونيو يوليو أغسطس اغسطس سبتمبر أكتوبر
    اكتوبر نوفمبر ديسمبر شباط آذار نيسان أيار حزيران تموز آب أيلول تشرين_الأول
    تشرين_الثاني كانون_الأول كانون_الثاني มกราคม กุมภาพันธ์ มีนาคม เมษายน พฤษภาคม มิถุนายน
    กรกฎาคม สิงหาคม กันยายน ตุลาคม พฤศจิกายน ธันวาคม ม.ค. ก.พ. มี.ค. เม.ย. พ.ค. มิ.ย. ก.ค.
    ส.ค. ก.ย. ต.ค. พ.ย. ธ.ค.""")
# Abbreviations that are a month only with their dot or a year ("6 déc.", "6 dic 2026")...
_MONTHS_DOTTED = _words("""janv févr fév avr juil déc ene abr ago dic mär dez okt giu lug ott fev
    mrt янв фев мар апр июн июл авг сен сент окт ноя дек""")
# ... or, being words too ("3 set" of tennis, "5 out of 10"), only with a year.
_MONTHS_WITH_YEAR = ["set", "out", "gen", "mag"]
_WEEKDAYS_EN = _words("""mon monday tue tues tuesday wed wednesday thu thur thurs thursday fri friday
    sat saturday sun sunday""")
_WEEKDAYS = _words("""montag dienstag mittwoch donnerstag freitag samstag sonntag mo. di. mi. do. fr.
    sa. so. lundi mardi mercredi jeudi vendredi samedi dimanche lun. mar. mer. jeu. ven. sam.
    dim. lunes martes miércoles miercoles jueves viernes sábado sabado domingo mié. jue. vie.
    sáb. dom. lunedì lunedi martedì martedi mercoledì mercoledi giovedì giovedi venerdì venerdi
    sabato domenica segunda-feira terça-feira terca-feira quarta-feira quinta-feira
    sexta-feira segunda terça quarta quinta sexta seg. ter. qua. qui. sex. maandag dinsdag
    woensdag donderdag vrijdag zaterdag zondag poniedziałek wtorek środa czwartek piątek sobota
    niedziela понедельник вторник среда четверг пятница суббота воскресенье пн вт ср чт пт сб
    вс пн. вт. ср. чт. пт. сб. вс. الاثنين الإثنين الثلاثاء الأربعاء الاربعاء الخميس الجمعة
    السبت الأحد الاحد""")
# "Today" and "yesterday" before a time ("heute, 14:03", "ayer a las 9:05", "вчера в 14:03");
# French "hier" is German "here", so it counts only before "à" or a comma.
_DAYS = _words("""heute gestern aujourd'hui aujourd’hui hoy ayer oggi ieri hoje ontem vandaag
    gisteren dzisiaj dziś wczoraj сегодня вчера bugün dün اليوم أمس امس""")
_DAYS_UNSPACED = _words("今天 昨天 今日 昨日 本日 오늘 어제 วันนี้ เมื่อวาน")
_AM_PM = _words("오전 오후 上午 下午 中午 晚上 早上 凌晨 午前 午後")
_AT = _words("at um à às a_las a_la alle all' om o в о")
# What follows a time glued to it in a byline ("14:03配信"); other words glued to a time make
# it content ("14:03発", a train's departure).
_TIME_AFTER = _words(
    "配信 更新 投稿 公開 掲載 発表 発行 現在 现在 发布 發布 發佈 发表 發表 編集 编辑"
)
_CJK_WEEKDAY = (
    r"(?:\s*[(（](?:[日月火水木金土](?:曜日?)?|[일월화수목금토](?:요일)?|(?:周|星期)[一二三四五六日天])"
    r"[)）]|\s*(?:星期|周|週|礼拜|禮拜)[一二三四五六日天]|\s*[日月火水木金土]曜日|\s*[일월화수목금토]요일)?"
)
_ZONE = (
    r"(?:\s*(?:z|gmt|utc|[ecmp][sd]?t|cet|cest|bst|ist|jst|kst|aest|[+-]\d{2}:?\d{2})(?![a-z]))?"
)
_UNITS = (
    r"(?:s|secs?|seconds?|m|mins?|minutes?|h|hrs?|hours?|d|days?|w|wks?|weeks?|mo|mos|months?"
    r"|y|yrs?|years?)"
)
# After "vor", "hace", "il y a", "há", "منذ": "vor 5 Min.", "il y a 1 heure", "منذ 3 ساعات".
_RELATIVE_LEADS = ["vor ", "hace ", "il y a ", "há ", "fa ", "منذ ", "قبل "]
_LEAD_UNITS = _words("""sekunden minuten stunden tagen wochen monaten jahren sekunde sek min minute std
    stunde tag woche monat jahr segundos minutos horas días dias semanas meses años segundo seg
    minuto hora h día dia semana mes año secondes minutes heures jours semaines mois ans seconde
    sec s mn heure jour semaine an minutos anos ano mês ثانية ثوان ثوانٍ دقيقة دقائق دقيقتين
    ساعة ساعات ساعتين يوم أيام يومين أسبوع أسابيع شهر أشهر شهور سنة سنوات سنتين""")
# Before "fa", "geleden", "temu", "назад", "önce", "前", "전": "5 ore fa", "3 часа назад".
_AGO_UNITS = _words("""secondi secondo minuti minuto min ore ora giorni giorno settimane settimana mesi
    mese anni anno seconden seconde minuten minuut uur uren dagen dag weken week maanden maand
    jaren jaar sekund sekundy sekundę minut minuty minutę godzin godziny godzinę godz. dni dzień
    tygodni tygodnie tydzień miesięcy miesiące miesiąc lat lata rok секунд секунды секунду сек.
    сек минут минуты минуту мин. мин час часа часов ч. ч дней дня день недель недели неделю
    месяцев месяца месяц мес. лет года год saniye dakika dk saat gün hafta ay dias horas
    minutos anos meses semanas วินาที นาที ชั่วโมง ชม. วัน สัปดาห์ เดือน ปี 秒 秒钟 秒鐘 分 分钟
    分鐘 時間 小时 小時 个小时 個小時 日 天 週間 周 週 个月 個月 か月 ヶ月 カ月 年 초 분 시간 일 주
    개월 달 년""")
_AGO = _words("fa geleden temu назад önce atrás ที่แล้ว ที่ผ่านมา 前 전")
_COUNTED = (
    r"(?:views?|likes?|comments?|reads?|plays?|listens?|followers?|subscribers?|retweets?"
    r"|reposts?|reactions?|upvotes?|replies|reply|visits|hits|aufrufe|kommentare|vues"
    r"|visualizaciones|(?:users?|visitors?|guests?|members?|people)\s+online"
    # "917 shares", "12 people are viewing this", "42 online" (not "3 online courses")
    r"|shares?|(?:people|users|visitors|others|shoppers)\s+(?:are\s+)?"
    r"(?:viewing|watching|looking|reading)"
    # a forum's or a blog's footer: "23 queries in 0.12 seconds"
    r"|queries"
    # a live blog's "3 new updates", WordPress's "12 thoughts on ..." over its comments
    r"|new\s+(?:updates?|posts?|entries|comments?)|(?:thoughts?|responses?)\s+(?:on|to)\b"
    r"|online(?![ \t]*[a-z]))"
)
_COUNTED_WORDS = _words("""visualizzazioni visualizações visualizacoes weergaven wyświetleń
    wyświetlenia odsłon просмотров просмотра просмотр просмотры مشاهدة مشاهدات görüntülenme
    阅读 次阅读 浏览 次浏览 次瀏覽 閲覧""")
_VIEW_LABELS = _words("""阅读 阅读量 阅读数 阅读次数 浏览 浏览量 浏览次数 点击 点击量 点击数 瀏覽 瀏覽次數
    閲覧数 閲覧 조회 조회수 评论 評論 留言 回复 回覆 点赞 댓글 просмотров просмотры
    visualizzazioni visualizações weergaven wyświetlenia wyświetleń المشاهدات مشاهدات""")


def _after(words: Sequence[str], then: str = r"\d") -> str:
    """Look-behinds for "one of ``words``, then the digit just matched" (or ``then``), grouped
    by length (a look-behind must have one width)."""
    by_width: dict[int, list[str]] = {}
    for word in words:
        by_width.setdefault(len(word), []).append(word)
    return "|".join(rf"(?<={_one_of(group)}{then})" for _, group in sorted(by_width.items()))


_COUNTER_LABELS = [
    f"{label}{sep}"
    for label in ("views", "view count", "pageviews", "page views", "viewed", "hits", "visits", "likes",
                  "comments", "reads", "plays", "aufrufe", "vues",
                  # a page's visitor counter, in the words such counters use (not "visitors"
                  # alone: "12,000 visitors" is as often what an article reports)
                  "visitor number", "visitor no.", "you are visitor", "visitors online",
                  "users online", "online users", "online now", "visitors today", "hit counter",
                  "besucher online", "besucherzähler", "read by", "shared", "viewed by",
                  "shares", "replies")
    for sep in (" ", ": ", ":", " : ")
] + ["visitor #", "visitor no"]  # fmt: skip
# "Comments (12)", "Views (1,234)": the count in brackets after its label
_COUNTER_LABELS += [
    f"{label}{sep}"
    for label in ("views", "comments", "likes", "shares", "replies", "hits", "reads")
    for sep in (" (", "(")
]  # fmt: skip
_COUNTER_LABELS += [
    f"{v}{sep}" for v in _VIEW_LABELS for sep in ("", " ", ": ", ":", "：", "(", "（")
]
# "Read 1,234 times", "Viewed 85 times": a count only with its "times" after it ("read 3
# books" is content)
_TIMES_LEADS = ["read ", "viewed ", "accessed ", "downloaded ", "opened ", "played "]
_COUNTDOWN_LEADS = ["within ", "in the next ", "in "]
_COPYRIGHT_LABELS = ["© ", "©", "(c) ", "copyright ", "copyright © ", "copyright (c) "]
# How long the server took, which some pages print: "generated in 0.12 s", "took 37 ms".
_TIMING_LEADS = [
    f"{verb} in " for verb in ("generated", "rendered", "served", "loaded", "processed")
]
_TIMING_LEADS += ["took ", "time: ", "load time: ", "page time: ", "execution time: "]
# The last characters of a month name and a space: a number after one may be a month-first
# date ("nov 30", "november 30, 2026"); the look back in Python confirms the month.
_MONTH_ENDS = [
    f"{end}{sep}"
    for end in ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov",
                "dec", "ary", "rch", "ril", "une", "uly", "ust", "ber", "ept", "mai", "rz")
    for sep in (" ", ". ")
]  # fmt: skip


def _digit_led(ascii_only: bool) -> re.Pattern[str]:
    """The one pattern for dates, times, relative times, counters and identifiers; for ASCII
    texts (``ascii_only``) without what only matches other text, which is most of its cost."""

    def alternation(items: Iterable[str]) -> str:
        return _one_of(w for w in items if w.isascii() or not ascii_only)

    def unspaced(pattern: str) -> str:  # an alternative only non-ASCII text can match
        return "" if ascii_only else f"|{pattern}"

    word, letter = (r"\w", r"[^\W\d_]") if ascii_only else (_W, _L)
    year = r",?\s+\d{4}(?!\d)"
    month = (
        rf"(?:{alternation(_MONTHS)}\.?|{alternation(_MONTHS_DOTTED)}(?:\.|(?={year}))"
        rf"|{alternation(_MONTHS_WITH_YEAR)}\.?(?={year}))(?!{letter})"
    )
    # 12:34, 12:34:56, 9:05 pm, 14.03 Uhr, 14h03, 14 h 03 (after the hour's first digit)
    clock = (
        r"(?::\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:\s*[ap]\.?\s*m\.?(?![a-z])|\s*uhr\b"
        + unspaced(r"\s*น\.")
        + r")?|\.\d{2}\s*uhr\b|\s?h\s?\d{2}(?!\d))"
    )
    time = rf"\d{{1,2}}{clock}"
    time_end = r"(?!\w)" if ascii_only else rf"(?:(?!\w)|(?={_one_of(_TIME_AFTER)}))"
    at = rf"(?:{alternation(_AT)}\s+)?"
    return re.compile(
        # a digit; one that starts a number (\b\d, written so the pattern begins with a digit
        # class) may start a date, time or counter
        rf"\d(?:(?<!{word}\d)(?:"
        # dates: ISO 8601 (with a time), numeric, CJK and Korean, day-first with a month name
        rf"(?P<date>\d{{3}}-\d{{2}}-\d{{2}}(?:[t ]{time}{_ZONE})?(?!{word})"
        r"|(?P<numeric>\d{0,3}[/.-]\d{1,2}[/.-]\d{2,4}(?!\d))"
        + unspaced(
            rf"\d{{0,3}}\s*년\s*\d{{1,2}}\s*월\s*\d{{1,2}}\s*일{_CJK_WEEKDAY}"
            rf"|\d{{0,3}}\s*年\s*\d{{1,2}}\s*月(?:\s*\d{{1,2}}\s*日{_CJK_WEEKDAY})?"
            rf"|\d?\s*月\s*\d{{1,2}}\s*[日号號]{_CJK_WEEKDAY}|\d?\s*월\s*\d{{1,2}}\s*일{_CJK_WEEKDAY}"
            r"|\d?/\d{1,2}\s*[(（](?:[日月火水木金土]|[일월화수목금토])[)）]"
        )
        + r"|\d{3}\.\s\d{1,2}\.\s\d{1,2}\.?"
        rf"|\d?(?:st|nd|rd|th|er)?\.?(?:\s+de)?\s+{month}(?:\s+de)?(?:{year})?"
        rf"(?:,?\s+{at}{time}{_ZONE})?)"
        # clock times: 12:34, 12:34:56, 9:05 pm, 5pm, 14時03分
        rf"|(?P<time>\d?{clock}{_ZONE}{time_end}"
        r"|\d?\s*[ap]\.?m\.?(?![a-z])(?!\w)"
        + unspaced(rf"\d?\s*[時时點点시]\s*\d{{1,2}}\s*[分분](?:\s*\d{{1,2}}\s*[秒초])?{time_end}")
        + r")"
        # relative times and counters: "5 minutes ago", "5m ago", "vor 5 minuten", "1.2k views"
        rf"|(?P<relative>\d*\s*{_UNITS}\s+ago(?![a-z])"
        rf"|(?:{_after([w for w in _RELATIVE_LEADS if w.isascii() or not ascii_only])})"
        rf"\d*\s+{alternation(_LEAD_UNITS)}(?!\w)"
        rf"|\d?\s*{alternation(_AGO_UNITS)}\s*{alternation(_AGO)}(?!{letter}))"
        rf"|(?P<counter>[\d.,]*\s*[km]?\+?\s*(?:{_COUNTED}|{alternation(_COUNTED_WORDS)})(?![a-z])"
        rf"|(?:{_after([w for w in _COUNTER_LABELS if w.isascii() or not ascii_only])})"
        rf"[\d.,]*[km]?(?![.,]|{word})"
        rf"|(?:{_after(_COPYRIGHT_LABELS)})\d{{3}}(?:\s*[-–]\s*\d{{4}})?(?!\w)"
        rf"|(?:{_after(_TIMING_LEADS)})[\d.,]*\s*(?:ms|milliseconds?|s|secs?|seconds?)(?![a-z])"
        rf"|(?:{_after(_TIMES_LEADS)})[\d.,]*\d\s+times(?![a-z])"
        # a shop's urgency widgets: "12 sold in last 24 hours", "order within 2 hrs 13 mins"
        r"|[\d.,]*\s*(?:sold|bought|purchased|orders?)\s+in\s+(?:the\s+)?(?:last|past)\s+\d+\s*"
        r"(?:hours?|hrs?|h|days?|minutes?|mins?)(?![a-z])"
        rf"|(?:{_after(_COUNTDOWN_LEADS)})\d*\s*(?:hours?|hrs?|h)\s*(?:and\s+)?\d+\s*"
        r"(?:minutes?|mins?|m)(?![a-z]))"
        # a day after what may be a month: "nov 30", "november 30, 2026 12:34" (a month and a
        # year alone, "may 2026", is what a text says, not when it was served)
        rf"|(?P<month_first>(?:{_after(_MONTH_ENDS)})\d?(?!\d)(?:st|nd|rd|th)?(?:,?\s+\d{{4}})?"
        rf"(?:,?\s+(?:at\s+)?{time}{_ZONE})?(?!\w))"
        r")"
        # or the digit is part of an identifier: it touches a letter, or 9 more digits follow
        r"|(?P<mixed>(?<=[a-z]\d)|(?=[a-z])|(?=\d{9})))",
        re.I,
    )


_DIGIT_LED = _digit_led(ascii_only=False)
_DIGIT_LED_ASCII = _digit_led(ascii_only=True)
_MONTH = rf"(?:{_one_of(_MONTHS)}\.?|{_one_of(_MONTHS_DOTTED)}\.?)(?![^\W\d_])"
_WEEKDAY = rf"(?:{_one_of(_WEEKDAYS_EN)}\.?|{_one_of(_WEEKDAYS)})"
# Ending where a digit-led date starts: the month of a month-first date (required), or what
# goes with a date or time (optional): its weekday ("monday, 30 november", "Mi., 9. Dezember"),
# "today" or "yesterday" ("heute, 14:03", "hier à 14h03", "昨天 14:03"), am or pm ("오후 2:03").
_MONTH_BEFORE = re.compile(rf"(?:\b(?:{_WEEKDAY}),?\s+)?\b{_MONTH}\s*\Z", re.I)
_LEAD_BEFORE = re.compile(
    rf"(?:\b(?:{_WEEKDAY}|{_one_of(_DAYS)})[,،]?\s+(?:{_one_of(_AT)}\s+)?|\bhier(?:,\s*|\s+à\s+)"
    rf"|{_one_of(_DAYS_UNSPACED)}\s*)?(?:{_one_of(_AM_PM)}\s*)?\Z",
    re.I,
)
_LOOK_BACK = 32  # characters: a weekday and a month name with their separators
# A clock time joined to another by a dash or "to" is a span the page states (opening hours
# "09:00–17:00", "9am-5pm", "de 9h00 à 18h00"): content, where a time alone is when the page
# was served. Both ends need minutes or am/pm, so "Room 5 - 10:30" is not one.
_SPAN_END = r"\d{1,2}(?:[:.h]\s?\d{2}(?:\s*[ap]\.?\s*m\.?)?|\s*[ap]\.?\s*m\.?)"
_SPAN_JOIN = r"\s*(?:[-–—~〜～]|to|until|till|bis|à|a|al|tot|até)\s*"
_SPAN_AFTER = re.compile(rf"{_SPAN_JOIN}{_SPAN_END}(?![\d:])", re.I)
_SPAN_BEFORE = re.compile(rf"(?<!\d){_SPAN_END}{_SPAN_JOIN}\Z", re.I)
_SPAN_LOOK_BACK = 24  # characters: "12.30 p.m. until "
_NUMBER = re.compile(r"\d+")
# Which machine answered, which some pages print: "served by node web5", "rendered on
# app-03.example.com". Word-led, so looked for only when its verb is in the text.
_SERVED_BY_VERBS = ("served", "generated", "rendered", "delivered", "processed")
_SERVED_BY = re.compile(
    # the time may come first: "Page generated in 234.716 ms on app-14" (its number already
    # gone as a duration by the time this is read)
    r"\b(?:served|generated|rendered|delivered|processed)\s+"
    r"(?:in\s+(?:[\d.,]+\s*(?:ms|milliseconds?|s|secs?|seconds?)\s+)?)?(?:by|on|from)\s+"
    r"(?:(?:the\s+)?(?:node|server|host|instance|pod|machine|backend)\s*:?\s*)?"
    r"(?=[\w.-]*[a-z])[\w.-]*\d[\w.-]*"  # a name with a digit in it: web5, app-03.example.com
    r"(?:\s+in\s+[\d.,]+\s*(?:ms|milliseconds?|s|secs?|seconds?)(?![a-z]))?",  # and the time
    re.I,
)
_RELATIVE_WORDS = re.compile(
    rf"\b(?:an?|one|a\s+few|few|several)\s+{_UNITS}\s+ago\b|\bjust\s+now\b|\bmoments?\s+ago\b"
    # "Updated today at 3:56 pm" is "yesterday at 3:56 pm" tomorrow (the time is gone already)
    r"|\b(?:today|yesterday)(?:\s+at)?\b"
)
_RELATIVE_CUES = ("ago", "just now", "today", "yesterday")
# "Mis à jour hier", "Actualizado hoy": a line that ends with "today" or "yesterday" is a
# byline. Looked for before each line break of the source, case aside, before white space is
# folded (_drop_days_at_line_end).
_DAY_WORDS = ("hier", *_DAYS, *_DAYS_UNSPACED)
_DAY_BEFORE = re.compile(rf"(?<!{_W}){_one_of(_DAY_WORDS)}[^\S\n]*\Z", re.I)

# Identifiers: a token (letters, digits and + / = _ -) that mixes character classes. Those
# with a digit are found by _DIGIT_LED; the rest by an upper-case letter after a lower-case
# one (random base64 has many, words have few).
_CASE_HINT = re.compile(r"[A-Z](?<=[a-z0-9][A-Z])")
_RUN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=_-")
_RUN = re.compile(r"[A-Za-z0-9+/=_-]+")
_RUN_PART = re.compile(r"[A-Za-z0-9]+")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I)
_FRACTION = re.compile(r"[.,]\d+(?!\d)")
_HEX_ID = re.compile(r"(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{8,}", re.I)


def _character_classes(token: str) -> int:
    return (
        any(c.isdigit() for c in token)
        + any(c.isupper() for c in token)
        + any(c.islower() for c in token)
    )


def _drop_identifier(run: str) -> str:
    """``run`` without its random parts; the whole run goes when it looks random itself."""
    # 16+ characters from two of three classes: random tokens almost always qualify, long
    # plain words ("internationalization") and hyphenated slugs of plain words do not; a
    # token without digits must also be a quarter upper case, which random base64 is and a
    # CamelCase name ("PricewaterhouseCoopers") is not.
    if _UUID.fullmatch(run):
        return " "
    if (
        len(run) >= 16
        and _character_classes(run) >= 2
        and (any(c.isdigit() for c in run) or sum(c.isupper() for c in run) * 4 >= len(run))
    ):
        return " "
    cleaned = _RUN_PART.sub(
        lambda m: " " if _HEX_ID.fullmatch(m[0]) or (len(m[0]) >= 10 and m[0].isdigit()) else m[0],
        run,
    )
    # A hyphenated id with a random part is random whole: "Request ID: 7f3a9c12-3d80" kept
    # its short tail, a new one on every answer (found by a run over real pages).
    return " " if cleaned != run and "-" in run else cleaned


class _Rewriter:
    """Builds the text with spans replaced, left to right; a span found inside one already
    replaced is skipped."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pieces: list[str] = []
        self.last = 0  # end of the text emitted so far
        self.scanned = 0  # end of the last identifier run looked at

    def replace(self, start: int, end: int, with_: str = " ") -> None:
        self.pieces += (self.text[self.last : start], with_)
        self.last = end

    def identifier_at(self, at: int) -> None:
        """Look at the run of token characters around ``at``, once."""
        if at < self.scanned:
            return
        text, start = self.text, at
        while start > max(self.scanned, self.last) and text[start - 1] in _RUN_CHARS:
            start -= 1
        run = _RUN.match(text, start)
        if run is None:  # pragma: no cover - the hint is a run character
            return
        self.scanned = run.end()
        if run[0].isdigit() and len(run[0]) >= 10:
            # an epoch timestamp goes with its fraction (1733420000.123: seconds as a float)
            fraction = _FRACTION.match(text, self.scanned)
            if fraction is not None:
                self.scanned = fraction.end()
                self.replace(start, self.scanned)
                return
        cleaned = _drop_identifier(run[0])
        if cleaned != run[0]:
            self.replace(start, self.scanned, cleaned)

    def result(self) -> str:
        if not self.pieces:
            return self.text
        return "".join([*self.pieces, self.text[self.last :]])


# An ASCII text's characters as the case hints see them: a lower-case letter or digit ("l"),
# an upper-case letter ("U"), anything else (".").
_CASE_CLASSES = (
    bytes(
        ord("l")
        if chr(c).islower() or chr(c).isdigit()
        else ord("U")
        if chr(c).isupper()
        else ord(".")
        for c in range(128)
    )
    + b"." * 128
)


def _digit_led_matches(text: str) -> Iterator[re.Match[str]]:
    """``_DIGIT_LED.finditer(text)``. The pattern can only start at a digit, and a regex scan
    for one costs about 10 ns a character while ``str.find`` skips to each of ten ASCII digits
    in a fraction of that; so an ASCII text is matched only where its digits are, left to
    right, skipping those inside a match (what finditer does)."""
    if not text.isascii():
        yield from _DIGIT_LED.finditer(text)
        return
    starts: list[int] = []
    for digit in "0123456789":
        at = text.find(digit)
        while at >= 0:
            starts.append(at)
            at = text.find(digit, at + 1)
    end = 0
    for at in sorted(starts):
        if at < end:
            continue
        match = _DIGIT_LED_ASCII.match(text, at)
        if match is not None:
            end = match.end()
            yield match


def _case_hints(text: str) -> list[int]:
    """Where ``_CASE_HINT`` matches (an upper-case letter after a lower-case one or a digit),
    found in an ASCII text by translating it to character classes and searching for the
    pair, for the same reason as :func:`_digit_led_matches`."""
    if not text.isascii():
        return [match.start() for match in _CASE_HINT.finditer(text)]
    classes = text.encode("ascii").translate(_CASE_CLASSES)
    hints, at = [], classes.find(b"lU")
    while at >= 0:
        hints.append(at + 1)
        at = classes.find(b"lU", at + 1)
    return hints


def _plausible_time(text: str) -> bool:
    """A clock time has an hour of 0-23 and minutes of 0-59: "28:25" and "87:85" are scores."""
    numbers = _NUMBER.findall(text)
    return int(numbers[0]) <= 23 and (len(numbers) < 2 or int(numbers[1]) <= 59)


def _plausible_date(text: str) -> bool:
    """A numeric date has a day and a month (in either order) and a year of four digits, or of
    two after a two-digit day and month ("06.12.26"): "2.4.10" is a version, "123-45-67" a
    phone number and "38-40-42" a list of sizes."""
    first, second, third = _NUMBER.findall(text)
    if len(first) == 4:  # 2026/12/06
        return 1 <= int(second) <= 12 and 1 <= int(third) <= 31 and len(third) <= 2
    low, high = sorted((int(first), int(second)))
    if not (1 <= low <= 12 and high <= 31):
        return False
    return len(third) == 4 or len(third) == len(first) == len(second) == 2


def _in_a_span(text: str, match: re.Match[str]) -> bool:
    """The clock time ``match`` found is one end of a span of times (:data:`_SPAN_AFTER`)."""
    if _SPAN_AFTER.match(text, match.end()) is not None:
        return True
    start = match.start()
    return _SPAN_BEFORE.search(text, max(0, start - _SPAN_LOOK_BACK), start) is not None


def _drop_volatile(text: str) -> str:
    """Identifiers, dates, times and counters: one pass over the digits, one over the
    upper-case letters that follow a lower-case one."""
    out = _Rewriter(text)
    for match in _digit_led_matches(text):
        kind, start = match.lastgroup, match.start()
        if kind == "mixed":
            out.identifier_at(start)
            continue
        if start < out.last:
            continue
        if kind == "month_first":
            lead = _MONTH_BEFORE.search(text, max(out.last, start - _LOOK_BACK), start)
            if lead is None:
                continue  # "number 30", "must 5": not a date
            start = lead.start()
        elif kind in ("date", "time"):
            if kind == "time" and (not _plausible_time(match[0]) or _in_a_span(text, match)):
                continue
            if match["numeric"] is not None and not _plausible_date(match[0]):
                continue
            lead = _LEAD_BEFORE.search(text, max(out.last, start - _LOOK_BACK), start)
            if lead is not None:
                start = lead.start()
        out.replace(start, match.end())
    text = out.result()
    out = _Rewriter(text)
    for at in _case_hints(text):
        out.identifier_at(at)
    return out.result()


def _drop_days_at_line_end(text: str) -> str:
    """Drop "today" or "yesterday" (:data:`_DAY_WORDS`) where it ends a line of the source:
    read before the line breaks go, which are the source's white space to every other rule
    (a server that re-wraps its text moved dates and counters across them: "Page generated
    in\\n0.26 seconds", "Comments\\n(10)", "just\\nnow" kept their numbers and words, a change
    on each new wrapping; found by a run over real pages the project had not seen)."""
    ends, at = [], text.find("\n")
    while at >= 0:
        ends.append(at)
        at = text.find("\n", at + 1)
    ends.append(len(text))
    out = _Rewriter(text)
    for end in ends:
        day = _DAY_BEFORE.search(text, max(out.last, end - 24), end)
        if day is not None:
            out.replace(day.start(), end)
    return out.result()


def normalize_content(text: str) -> str:
    """Text with the volatile tokens dropped, casefolded and whitespace-folded.

    Numbers stay unless they are dates, times, relative times, counters ("1.2k views",
    "Views: 12"), copyright years or identifiers; so a changed price, count, score or year in
    a sentence is a changed fingerprint. Text is composed (NFC) first: the same words served
    decomposed (NFD, as macOS tools write Korean and Vietnamese) are the same content.
    """
    if not text.isascii():
        text = unicodedata.normalize("NFC", text)
    # One plain space between words from here on, as the patterns read a date, a counter or a
    # byline: a page re-wrapped by its server, or written with &nbsp; or two spaces, kept
    # its volatile tokens (the same run over unseen real pages).
    text = fold_spaces(_drop_days_at_line_end(text))
    text = _drop_volatile(text).casefold()  # case tells random tokens from words
    if any(cue in text for cue in _RELATIVE_CUES):
        text = _RELATIVE_WORDS.sub(" ", text)
    if any(verb in text for verb in _SERVED_BY_VERBS):
        text = _SERVED_BY.sub(" ", text)
    return fold_spaces(text)
