//! Statistics across trials: summaries, the two-sample test, the USL fit.
