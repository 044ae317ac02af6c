-- UCI Adult (Census Income), 32,561 rows of adult.data. Column names in snake_case.
-- '?' (unknown) is kept as a category value, as in the source file: the table has no NULLs.
CREATE TABLE IF NOT EXISTS public.adult (
    age             integer NOT NULL,
    workclass       text    NOT NULL,
    fnlwgt          integer NOT NULL,
    education       text    NOT NULL,
    education_num   integer NOT NULL,
    marital_status  text    NOT NULL,
    occupation      text    NOT NULL,
    relationship    text    NOT NULL,
    race            text    NOT NULL,
    sex             text    NOT NULL,
    capital_gain    integer NOT NULL,
    capital_loss    integer NOT NULL,
    hours_per_week  integer NOT NULL,
    native_country  text    NOT NULL,
    income          text    NOT NULL
);
