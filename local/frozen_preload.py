"""The last of the environments' forkserver preloads (``environments.PRELOAD``): importing it
freezes what the preloads made (``gc.freeze``), so no environment's collector walks, and by
walking writes to, the pages it shares with the server. Without it the first full collection in
a new environment copied the whole inherited heap page by page (copy-on-write): issue 38's bench
saw single collections of 0.4-1.3 s in the burst's cold starts. The handlers freeze their own
init at their first request (``racecap.http``), as on Lambda, where nothing is forked."""

import gc

gc.freeze()
