-- public.flights: the vega-datasets flights-20k sample (see SOURCE.txt), one row per flight.
CREATE TABLE IF NOT EXISTS public.flights (
    date date NOT NULL,            -- day of the scheduled departure (2001-01-01 .. 2001-03-31)
    hour integer NOT NULL,         -- hour of the scheduled departure, 0-23 (local time)
    delay integer NOT NULL,        -- departure delay in minutes (negative: early)
    distance integer NOT NULL,     -- miles
    origin text NOT NULL,          -- IATA code
    destination text NOT NULL,     -- IATA code
    origin_state text,             -- USPS code of the origin airport's state (NULL: unknown)
    dest_state text                -- USPS code of the destination airport's state (NULL: unknown)
);
