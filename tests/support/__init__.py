"""What the tests share and import: helpers, fakes and real servers. Fixtures stay in conftest.py
(pytest finds them there); a conftest imports what it needs from here."""
