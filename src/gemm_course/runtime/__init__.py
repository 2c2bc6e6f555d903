"""The runtime: the problem and its tensor rules (``problem``), the step table (``ladder``), one plan
per GEMM (``plan``), compiling anywhere (``arch``), launching (``run``), the drop-in ``F.linear``
(``linear``) and the debug builds' bounded waits (``watchdog``)."""
