"""Agent text that tries to run, fetch or hide something where it is shown: the HTML
export and the host's page both take every line of it as text (issue 19, 4; issue 42, 6).
Each attack carries the mark ATTACK, which must show where it was put."""

ATTACKS = (
    "<script>window.pwned='script'</script> ATTACK",
    "<img src=x onerror=\"window.pwned='img'\"> ATTACK",
    "<svg onload=\"window.pwned='svg'\"></svg> ATTACK",
    "<iframe src=\"javascript:window.pwned='iframe'\"></iframe> ATTACK",
    "[ATTACK link](javascript:window.pwned='link')",
    "[ATTACK data](data:text/html,<script>window.pwned='data'</script>)",
    "![ATTACK image](http://198.51.100.7/track.png)",
    '<div style="display:none">hidden ATTACK</div>',
    "<style>body{display:none}</style> ATTACK",
    '<a href="//198.51.100.7/" onclick="window.pwned=\'click\'">ATTACK</a>',
    "&lt;script&gt;window.pwned='entity'&lt;/script&gt; ATTACK",
    '<form action="http://198.51.100.7/"><button>ATTACK</button></form>',
    '<meta http-equiv="refresh" content="0;url=http://198.51.100.7/"> ATTACK',
    '<base href="http://198.51.100.7/"> ATTACK',
    "<math><mtext><table><mglyph><style><img src=x onerror=\"window.pwned='mxss'\">ATTACK",
)
